"""Makes a copy of torch-sys's C++ wrapper compile against an older libtorch.

tch's generated wrapper (`libtch/torch_api_generated.cpp`) calls every ATen operator of the
libtorch it was generated for. An older libtorch lacks a few of them, or takes other arguments.
Compile the file for syntax only, and replace the body of each wrapper function the compiler
rejects with a throw (the Rust side then gets an error if it ever calls one; the trainer calls
none). Repeat until the file compiles.

    python3 stub_missing_ops.py TORCH_SYS_COPY LIBTORCH_DIR
"""

import re
import subprocess
import sys

src, libtorch = sys.argv[1], sys.argv[2]
path = f"{src}/libtch/torch_api_generated.cpp"
cmd = ["g++", "-std=c++17", "-fsyntax-only", "-fmax-errors=0", "-w", "-D_GLIBCXX_USE_CXX11_ABI=1",
       "-DGLOG_USE_GLOG_EXPORT", f"-I{libtorch}/include", f"-I{libtorch}/include/torch/csrc/api/include",
       f"-I{src}/libtch", path]
ERROR = re.compile(r"torch_api_generated\.cpp:(\d+):\d+: error:")

for attempt in range(5):
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode == 0:
        print(f"compiles after {attempt} pass(es) of stubbing")
        sys.exit(0)
    bad = sorted({int(m.group(1)) for m in ERROR.finditer(result.stderr)})
    if not bad:
        sys.exit(result.stderr[-4000:])
    lines = open(path).read().split("\n")
    stubbed = []
    # From the bottom up, so that stubbing a function leaves the lines above it where they were.
    for line_no in reversed(bad):
        i = line_no - 1
        start = i
        while start >= 0 and not re.match(r"^\S.*\batg_\w+\(", lines[start]):
            start -= 1
        name = re.search(r"\b(atg_\w+)\(", lines[start]).group(1)
        open_at = next(j for j in range(start, i + 1) if lines[j].strip() == "PROTECT(")
        close_at = next(j for j in range(i, len(lines)) if lines[j] == "  )")
        if name not in stubbed:
            lines[open_at + 1:close_at] = [f'    throw std::runtime_error("{name}: not in this libtorch");']
            stubbed.append(name)
    open(path, "w").write("\n".join(lines))
    print(f"pass {attempt + 1}: stubbed {', '.join(stubbed)}")
sys.exit("still does not compile")

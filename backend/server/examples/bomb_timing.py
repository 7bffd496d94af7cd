"""Times the server's answers to alias-bomb launches and previews (a 9-level YAML alias bomb
in one override) and, sent at the same moment on another connection, a learner's pings.
Uses tornado's WebSocket client from the project's Python environment:

    ~/.cache/scalebook/py-venv/bin/python backend/server/examples/bomb_timing.py \
        target/release/scalebook static config/ViT.yaml
"""
import asyncio, json, re, statistics, subprocess, sys, time
from tornado.websocket import websocket_connect

async def main():
    server = subprocess.Popen([sys.argv[1], "serve", "--port", "0", "--static-dir", sys.argv[2], "--yaml-config", sys.argv[3]],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    url = None
    for line in server.stdout:
        m = re.search(r"Scalebook is ready: http://([^/]+)/\?token=(\S+)", line)
        if m:
            url = f"ws://{m.group(1)}/api/ws?token={m.group(2)}"
            break
    bomb = "img_size=[&a0 [x,x,x,x,x,x,x,x,x]" + "".join(f", &a{l} [{','.join([f'*a{l-1}'] * 9)}]" for l in range(1, 9)) + "]"
    attacker, learner = await websocket_connect(url), await websocket_connect(url)
    times, sizes, pings, codes = [], [], [], set()
    for n in range(50):
        for kind in ("launch", "preview_slurm"):
            msg = {"id": f"b{n}{kind}", "type": kind, "config": "cpu_tiny", "overrides": [bomb]}
            if kind == "preview_slurm":
                msg["executor"] = {"kind": "slurm", "cluster": "perlmutter"}
            t0 = time.perf_counter()
            await attacker.write_message(json.dumps(msg))
            await learner.write_message(json.dumps({"id": f"p{n}{kind}", "type": "ping", "nonce": n}))
            async def answer(ws, prefix):
                while True:
                    text = await ws.read_message()
                    reply = json.loads(text)
                    if reply.get("id", "").startswith(prefix):
                        if prefix == "b":
                            codes.add(reply.get("code"))
                        return time.perf_counter() - t0, len(text)
            (bt, bs), (pt, _) = await asyncio.gather(answer(attacker, "b"), answer(learner, "p"))
            times.append(bt * 1000); sizes.append(bs); pings.append(pt * 1000)
            await asyncio.sleep(0.06)  # under the rate limit: every bomb is parsed, none dropped
    server.terminate()
    print(f"bomb: {len(bomb)} bytes sent; answer {max(sizes)} bytes at most; "
          f"answer latency median {statistics.median(times):.1f} ms, max {max(times):.1f} ms; "
          f"other client's ping median {statistics.median(pings):.1f} ms, max {max(pings):.1f} ms ({len(times)} bombs, answer codes {codes})")

asyncio.run(main())

//! A step profile as large as a real one, written for the benchmarks and the browser tests
//! that need a trace of hundreds of thousands of events.

use std::io::{self, BufWriter, Write};
use std::path::Path;

const OPS: [&str; 8] =
    ["aten::linear", "aten::addmm", "aten::layer_norm", "aten::gelu", "aten::softmax", "aten::matmul", "aten::add", "aten::copy_"];

/// Writes a rank-0 trace of about `events` events in Kineto's form over `steps` steps of 50 ms
/// (the trainer's ranges around each, CPU ops on the main thread with their arguments, the
/// kernels they launched on a GPU stream, an all-reduce a step with its NCCL kernel), as large
/// as a long profile's; its size in bytes.
pub fn write_kineto_trace(path: &Path, events: u64, steps: u64) -> io::Result<u64> {
    let mut out = BufWriter::new(std::fs::File::create(path)?);
    write!(out, r#"{{"schemaVersion":1,"deviceProperties":[{{"id":0,"name":"NVIDIA A100-SXM4-40GB"}}],"traceEvents":["#)?;
    write!(out, r#"{{"ph":"M","name":"thread_name","pid":1321,"tid":1376,"args":{{"name":"main"}}}}"#)?;
    let per_step = events / steps;
    let step_us = 50_000.0;
    let mut ts = 4_800_958_445_864.0;
    for step in 1..=steps {
        let t0 = ts;
        let range = |out: &mut BufWriter<std::fs::File>, name: &str, start: f64, dur: f64| {
            write!(out, r#",{{"ph":"X","cat":"user_annotation","name":"{name}","pid":1321,"tid":1376,"ts":{start:.3},"dur":{dur:.3}}}"#)
        };
        range(&mut out, &format!("step {step}"), t0, step_us)?;
        range(&mut out, "data_wait", t0, 2_000.0)?;
        range(&mut out, "forward", t0 + 2_000.0, 15_000.0)?;
        range(&mut out, "backward", t0 + 17_000.0, 25_000.0)?;
        range(&mut out, "grad_allreduce", t0 + 40_000.0, 5_000.0)?;
        range(&mut out, "c10d::all_reduce", t0 + 40_500.0, 4_000.0)?;
        range(&mut out, "optimizer", t0 + 45_000.0, 4_000.0)?;
        // The ops: pairs of a CPU op and the kernel it launched, spread over the step.
        let ops = per_step.saturating_sub(7) / 2;
        let gap = 47_000.0 / ops as f64;
        for i in 0..ops {
            let (name, start) = (OPS[(i % OPS.len() as u64) as usize], t0 + 2_000.0 + i as f64 * gap);
            write!(
                out,
                r#",{{"ph":"X","cat":"cpu_op","name":"{name}","pid":1321,"tid":1376,"ts":{start:.3},"dur":{:.3},"args":{{"External id":{i},"Record function id":0,"Sequence number":{i},"Fwd thread id":0,"Ev Idx":{i},"Input Dims":[[32,1024,768],[768,768]],"Input type":["float","float"]}}}}"#,
                gap * 0.8
            )?;
            let kernel = if (40_500.0..44_500.0).contains(&(start - t0)) && i % 2 == 0 {
                "ncclKernel_AllReduce_RING_LL_Sum_float"
            } else {
                "ampere_sgemm_128x64_tn"
            };
            write!(
                out,
                r#",{{"ph":"X","cat":"kernel","name":"{kernel}","pid":0,"tid":7,"ts":{:.3},"dur":{:.3},"args":{{"queued":0,"device":0,"stream":7,"correlation":{i},"registers per thread":128,"grid":[1024,1,1],"block":[256,1,1]}}}}"#,
                start + gap * 0.5,
                gap * 0.7
            )?;
        }
        ts += step_us;
    }
    write!(out, r#"],"traceName":"rank0","displayTimeUnit":"ms","baseTimeNanoseconds":1790857026000000000}}"#)?;
    out.flush()?;
    Ok(std::fs::metadata(path)?.len())
}

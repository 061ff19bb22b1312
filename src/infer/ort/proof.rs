//! Proof that a model runs where it was asked to: one profiled run after
//! warm-up, and the provider ONNX Runtime's profiler names for each node it
//! ran. A GPU model with any node on the CPU provider fails its load, so the
//! tier fails loudly instead of running on the CPU in silence.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One event of ONNX Runtime's profile (Chrome trace format); only node
/// kernels (`cat` Node, name `<node>_kernel_time`) are counted.
#[derive(Debug, Deserialize)]
struct TraceEvent {
    #[serde(default)]
    cat: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    dur: u64,
    #[serde(default)]
    args: TraceArgs,
}

#[derive(Debug, Default, Deserialize)]
struct TraceArgs {
    #[serde(default)]
    op_name: String,
    #[serde(default)]
    provider: String,
}

/// Nodes and kernel time on one provider in the profiled run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Share {
    pub nodes: usize,
    pub micros: u64,
}

/// Where the nodes of one profiled run ran, by provider (`cuda`,
/// `tensorrt`, `cpu`, or ONNX Runtime's own name for any other).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Assignment {
    pub providers: BTreeMap<String, Share>,
    /// Operators of the nodes that ran on the CPU provider, each once.
    pub cpu_ops: Vec<String>,
}

/// The GPU providers, by fusiond's names.
const GPU: [&str; 2] = ["cuda", "tensorrt"];

/// fusiond's name of an ONNX Runtime provider.
fn short(provider: &str) -> String {
    match provider {
        "CPUExecutionProvider" => "cpu".into(),
        "CUDAExecutionProvider" => "cuda".into(),
        "TensorrtExecutionProvider" => "tensorrt".into(),
        other => other.to_string(),
    }
}

impl Assignment {
    /// Reads a profile file's JSON.
    pub fn from_profile(json: &[u8]) -> Result<Assignment, String> {
        let events: Vec<TraceEvent> =
            serde_json::from_slice(json).map_err(|e| format!("ONNX Runtime's profile is not a trace: {e}"))?;
        let mut out = Assignment::default();
        for e in events.iter().filter(|e| e.cat == "Node" && e.name.ends_with("_kernel_time")) {
            let provider = short(&e.args.provider);
            if provider == "cpu" && !out.cpu_ops.contains(&e.args.op_name) {
                out.cpu_ops.push(e.args.op_name.clone());
            }
            let share = out.providers.entry(provider).or_default();
            share.nodes += 1;
            share.micros += e.dur;
        }
        Ok(out)
    }

    /// `cuda: 112 nodes, tensorrt: 1 nodes`.
    pub fn summary(&self) -> String {
        let shares: Vec<String> = self.providers.iter().map(|(p, s)| format!("{p}: {} nodes", s.nodes)).collect();
        if shares.is_empty() {
            "no nodes".into()
        } else {
            shares.join(", ")
        }
    }

    /// Nodes that ran on the GPU providers.
    pub fn gpu_nodes(&self) -> usize {
        GPU.iter().filter_map(|p| self.providers.get(*p)).map(|s| s.nodes).sum()
    }

    /// `Ok` when every node ran on a GPU provider; else what ran where.
    pub fn all_on_gpu(&self) -> Result<(), String> {
        let gpu_only = self.providers.keys().all(|p| GPU.contains(&p.as_str()));
        if self.gpu_nodes() > 0 && gpu_only {
            return Ok(());
        }
        Err(format!(
            "the profiled run after warm-up did not run on the GPU alone ({}; on the CPU: {}); install an ONNX \
             Runtime with the GPU providers and their CUDA, cuDNN and TensorRT libraries, or set \
             inference.ort.cpu_fallback = true to accept the CPU",
            self.summary(),
            if self.cpu_ops.is_empty() { "none".to_string() } else { self.cpu_ops.join(" ") }
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(name: &str, op: &str, provider: &str, dur: u64) -> String {
        format!(
            r#"{{"cat":"Node","pid":1,"tid":2,"dur":{dur},"ts":5,"ph":"X","name":"{name}",
               "args":{{"op_name":"{op}","provider":"{provider}"}}}}"#
        )
    }

    fn trace(events: &[String]) -> Vec<u8> {
        let session = r#"{"cat":"Session","pid":1,"tid":2,"dur":900,"ts":1,"ph":"X","name":"model_run","args":{}}"#;
        let all: Vec<&str> = std::iter::once(session).chain(events.iter().map(String::as_str)).collect();
        format!("[{}]", all.join(",")).into_bytes()
    }

    #[test]
    fn a_run_all_on_cuda_is_proven() {
        let a = Assignment::from_profile(&trace(&[
            event("conv1_kernel_time", "Conv", "CUDAExecutionProvider", 40),
            event("conv1_fence_before", "Conv", "CUDAExecutionProvider", 1),
            event("relu_kernel_time", "Relu", "CUDAExecutionProvider", 2),
        ]))
        .unwrap();
        assert_eq!(a.providers["cuda"], Share { nodes: 2, micros: 42 });
        assert!(a.all_on_gpu().is_ok());
    }

    #[test]
    fn one_node_on_the_cpu_fails_and_is_named() {
        let a = Assignment::from_profile(&trace(&[
            event("trt_kernel_time", "TRTKernel_graph_main_0", "TensorrtExecutionProvider", 300),
            event("resize_kernel_time", "Resize", "CPUExecutionProvider", 30),
        ]))
        .unwrap();
        let err = a.all_on_gpu().unwrap_err();
        assert!(err.contains("cpu: 1 nodes") && err.contains("Resize") && err.contains("cpu_fallback"), "{err}");
    }

    #[test]
    fn a_run_on_the_cpu_alone_or_with_no_nodes_fails() {
        let cpu = Assignment::from_profile(&trace(&[event("c_kernel_time", "Conv", "CPUExecutionProvider", 9)]));
        assert!(cpu.unwrap().all_on_gpu().is_err());
        assert!(Assignment::from_profile(&trace(&[])).unwrap().all_on_gpu().unwrap_err().contains("no nodes"));
        assert!(Assignment::from_profile(b"{not json").is_err());
    }
}

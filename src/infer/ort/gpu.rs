//! What the box's GPU and its libraries are, as far as TensorRT's engines
//! depend on them: the GPU's name and compute capability (from
//! `nvidia-smi`, or a Jetson's device tree), and the TensorRT and CUDA
//! versions of the libraries the loader would find. The parsing is plain
//! functions over text and file names; only [`probe`] reads the system.

use std::path::{Path, PathBuf};
use std::process::Command;

/// One GPU, as the engine cache's key names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuIdentity {
    pub name: String,
    /// `9.0`, `8.7`.
    pub compute_capability: String,
}

/// The versions of the GPU libraries found (`None`: not found).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Toolkit {
    pub tensorrt: Option<String>,
    pub cuda: Option<String>,
}

/// A line of `nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader`.
pub fn parse_nvidia_smi(line: &str) -> Option<GpuIdentity> {
    let (name, cc) = line.trim().rsplit_once(',')?;
    let (name, cc) = (name.trim(), cc.trim());
    let valid = !name.is_empty() && cc.split('.').count() == 2 && cc.split('.').all(|p| p.parse::<u32>().is_ok());
    valid.then(|| GpuIdentity { name: name.into(), compute_capability: (*cc).into() })
}

/// A Jetson's GPU from its device tree's `compatible` list (NUL-separated)
/// and `model` string: the SoC fixes the compute capability.
pub fn parse_jetson(compatible: &str, model: &str) -> Option<GpuIdentity> {
    const SOCS: [(&str, &str, &str); 4] = [
        ("nvidia,tegra234", "Orin", "8.7"),
        ("nvidia,tegra194", "Xavier", "7.2"),
        ("nvidia,tegra186", "TX2", "6.2"),
        ("nvidia,tegra210", "Nano/TX1", "5.3"),
    ];
    let listed: Vec<&str> = compatible.split('\0').map(str::trim).collect();
    let (soc, family, cc) = SOCS.iter().find(|(soc, _, _)| listed.contains(soc))?;
    let model = model.trim_matches(|c: char| c == '\0' || c.is_whitespace());
    let name = if model.is_empty() { format!("Jetson {family}") } else { model.to_string() };
    Some(GpuIdentity {
        name: format!("{name} ({})", soc.trim_start_matches("nvidia,")),
        compute_capability: (*cc).into(),
    })
}

/// The version in a library file name `stem.so.X[.Y[.Z]]`, when the name
/// is that library's.
fn version_in(file: &str, stem: &str) -> Option<String> {
    let rest = file.strip_prefix(stem)?.strip_prefix(".so.")?;
    rest.split('.').all(|p| p.parse::<u32>().is_ok()).then(|| rest.to_string())
}

/// The most precise version of library `stem` among `files` (the one with
/// the most parts, then the highest).
pub fn library_version<'a>(files: impl IntoIterator<Item = &'a str>, stem: &str) -> Option<String> {
    let key = |v: &String| {
        let parts: Vec<u32> = v.split('.').filter_map(|p| p.parse().ok()).collect();
        (parts.len(), parts)
    };
    files.into_iter().filter_map(|f| version_in(f, stem)).max_by_key(key)
}

/// The folders the dynamic loader would search for the GPU libraries:
/// `LD_LIBRARY_PATH`, the ONNX Runtime library's own folder, and the
/// places CUDA, TensorRT and JetPack install to.
pub fn library_dirs(ort_library: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("LD_LIBRARY_PATH")
        .map(|v| std::env::split_paths(&v).filter(|p| !p.as_os_str().is_empty()).collect())
        .unwrap_or_default();
    dirs.extend(ort_library.parent().map(Path::to_path_buf));
    for d in [
        "/usr/local/cuda/lib64",
        "/usr/local/cuda/targets/aarch64-linux/lib",
        "/usr/local/cuda/targets/x86_64-linux/lib",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib64",
        "/usr/lib",
    ] {
        dirs.push(PathBuf::from(d));
    }
    dirs
}

/// The TensorRT and CUDA runtime versions among the files of `dirs`.
pub fn toolkit(dirs: &[PathBuf]) -> Toolkit {
    let names: Vec<String> = dirs
        .iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flatten()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("libnvinfer.so.") || n.starts_with("libcudart.so."))
        .collect();
    let names = || names.iter().map(String::as_str);
    Toolkit { tensorrt: library_version(names(), "libnvinfer"), cuda: library_version(names(), "libcudart") }
}

/// The GPU `device_id`: `nvidia-smi` where it runs, else a Jetson's device
/// tree; `None` when neither says.
pub fn probe(device_id: i32) -> Option<GpuIdentity> {
    let smi = Command::new("nvidia-smi")
        .args(["--query-gpu=name,compute_cap", "--format=csv,noheader", &format!("--id={device_id}")])
        .output();
    if let Some(out) = smi.ok().filter(|o| o.status.success()) {
        if let Some(gpu) = String::from_utf8_lossy(&out.stdout).lines().find_map(parse_nvidia_smi) {
            return Some(gpu);
        }
    }
    let compatible = std::fs::read_to_string("/proc/device-tree/compatible").ok()?;
    let model = std::fs::read_to_string("/proc/device-tree/model").unwrap_or_default();
    parse_jetson(&compatible, &model)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvidia_smi_lines_give_name_and_compute_capability() {
        let gpu = parse_nvidia_smi("NVIDIA H200, 9.0\n").unwrap();
        assert_eq!((gpu.name.as_str(), gpu.compute_capability.as_str()), ("NVIDIA H200", "9.0"));
        assert_eq!(parse_nvidia_smi("NVIDIA GeForce RTX 3060, 8.6").unwrap().compute_capability, "8.6");
        assert!(parse_nvidia_smi("No devices were found").is_none());
        assert!(parse_nvidia_smi("NVIDIA H200, [N/A]").is_none());
    }

    #[test]
    fn a_jetson_is_named_by_its_device_tree() {
        let orin = parse_jetson(
            "nvidia,p3737-0000+p3701-0005\0nvidia,p3701-0005\0nvidia,tegra234\0",
            "NVIDIA Jetson AGX Orin Developer Kit\0",
        )
        .unwrap();
        assert_eq!(orin.compute_capability, "8.7");
        assert_eq!(orin.name, "NVIDIA Jetson AGX Orin Developer Kit (tegra234)");
        assert_eq!(parse_jetson("nvidia,tegra194\0", "").unwrap().name, "Jetson Xavier (tegra194)");
        assert!(parse_jetson("raspberrypi,5-model-b\0brcm,bcm2712\0", "Raspberry Pi 5").is_none());
    }

    #[test]
    fn library_versions_come_from_the_most_precise_file_name() {
        let files = ["libnvinfer.so", "libnvinfer.so.10", "libnvinfer.so.10.3.0", "libnvinfer_plugin.so.10.3.0"];
        assert_eq!(library_version(files, "libnvinfer").as_deref(), Some("10.3.0"));
        assert_eq!(library_version(["libcudart.so.13"], "libcudart").as_deref(), Some("13"));
        assert_eq!(
            library_version(["libcudart.so.12.6.68", "libcudart.so.12.2.1"], "libcudart").as_deref(),
            Some("12.6.68")
        );
        assert_eq!(library_version(["libcudart.so.bak"], "libcudart"), None);
    }

    #[test]
    fn the_toolkit_is_read_from_the_library_folders() {
        let dir = tempfile::tempdir().unwrap();
        for f in ["libnvinfer.so.10.3.0", "libcudart.so.12.6.68", "libcudnn.so.9"] {
            std::fs::write(dir.path().join(f), b"").unwrap();
        }
        let t = toolkit(&[dir.path().to_path_buf(), PathBuf::from("/nonexistent")]);
        assert_eq!(t, Toolkit { tensorrt: Some("10.3.0".into()), cuda: Some("12.6.68".into()) });
        assert_eq!(toolkit(&[]), Toolkit::default());
    }
}

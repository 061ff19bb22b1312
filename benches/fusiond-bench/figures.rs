//! The figures `fusiond-bench live` prints: medians and p95 of per-frame
//! stage times, and the process's CPU time.

pub fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rfind(')').map_or("", |i| &stat[i + 2..]);
    // Fields 14 and 15 (utime, stime) are 11 and 12 after the command name.
    let f: Vec<&str> = after.split_whitespace().collect();
    let field = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK).ok().flatten().unwrap_or(100) as f64;
    (field(11) + field(12)) / hz
}

/// Per-frame stage times: yuyv, inference, pixelwork, jpeg, outputs,
/// publish, end to end (ms).
#[derive(Default)]
pub struct Cols(Vec<[f64; 7]>);

impl Cols {
    pub fn push(&mut self, row: [f64; 7]) {
        self.0.push(row);
    }

    /// Prints the medians as a table row and returns them by name.
    pub fn report(&self, label: &str) -> std::collections::BTreeMap<&'static str, f64> {
        let col = |k: usize| self.0.iter().map(|r| r[k]).collect::<Vec<f64>>();
        let mut non_infer: Vec<f64> = self.0.iter().map(|r| r[0] + r[2] + r[3] + r[4] + r[5]).collect();
        // What the reference pipeline times as one frame (inference, pixel
        // work, JPEG), summed per frame before the median, as it does.
        let mut frame: Vec<f64> = self.0.iter().map(|r| r[1] + r[2] + r[3]).collect();
        let m: Vec<f64> = (0..7).map(|k| median(&mut col(k))).collect();
        let (non_infer, p95) = (median(&mut non_infer), p95(&mut col(6)));
        println!(
            "  {label:<38} {:>7.2} {:>9.2} {:>9.2} {:>7.2} {:>7.2} {:>8.2} {non_infer:>9.2} {:>9.2} {p95:>8.2}",
            m[0], m[1], m[2], m[3], m[4], m[5], m[6]
        );
        let names = ["yuyv", "inference", "pixelwork", "jpeg", "outputs", "publish", "e2e"];
        let mut out: std::collections::BTreeMap<_, _> = names.into_iter().zip(m).collect();
        out.insert("non_infer", non_infer);
        out.insert("frame", median(&mut frame));
        out.insert("e2e_p95", p95);
        out
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn p95(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 * 0.95).ceil() as usize).clamp(1, v.len()) - 1]
}

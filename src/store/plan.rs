//! Which files staging copies, which it keeps, and which tiers fit: pure
//! logic over sizes and hashes, no IO.

use std::collections::BTreeMap;

/// A model file a tier needs.
#[derive(Debug, Clone, PartialEq)]
pub struct Wanted {
    pub name: String,
    /// Size of the model file.
    pub size: u64,
    /// Further ramdisk bytes its side files take.
    pub extra: u64,
    /// The manifest's checksum, when it has one.
    pub sha256: Option<String>,
}

/// What a previous run left on the ramdisk: name → (sha256, size).
pub type StagedIndex = BTreeMap<String, (String, u64)>;

#[derive(Debug, Clone, PartialEq)]
pub struct TierPlan {
    pub tier: String,
    /// Models to copy for this tier (not already planned by a lower tier).
    pub copy: Vec<String>,
    /// Models already staged with the right hash and size.
    pub keep: Vec<String>,
    /// Why the tier cannot be staged, if it cannot.
    pub refused: Option<String>,
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

/// Plans tiers lowest first. A model counts as staged when the index has it
/// with the manifest's hash and the same size (a model without a manifest
/// hash is always copied, so it is always hashed). A tier whose new files do
/// not fit in what is left of `free` bytes is refused with the sizes; later
/// tiers are still tried.
pub fn plan(tiers: &[(String, Result<Vec<Wanted>, String>)], staged: &StagedIndex, free: u64) -> Vec<TierPlan> {
    let mut left = free;
    let mut present: Vec<&str> = Vec::new();
    let mut out = Vec::new();
    for (tier, wanted) in tiers {
        let wanted = match wanted {
            Ok(w) => w,
            Err(reason) => {
                out.push(TierPlan { tier: tier.clone(), copy: vec![], keep: vec![], refused: Some(reason.clone()) });
                continue;
            }
        };
        let (mut copy, mut keep, mut need) = (Vec::new(), Vec::new(), 0u64);
        for w in wanted.iter().filter(|w| !present.contains(&w.name.as_str())) {
            let kept = matches!((staged.get(&w.name), &w.sha256), (Some((sha, size)), Some(want)) if sha == want && *size == w.size);
            if kept {
                keep.push(w.name.clone());
            } else if !copy.contains(&w.name) {
                copy.push(w.name.clone());
                need += w.size + w.extra;
            }
        }
        if need > left {
            let refused = format!(
                "needs {:.1} MB more on the ramdisk but only {:.1} MB of {:.1} MB is free; raise models.ramdisk_size_mib",
                mb(need),
                mb(left),
                mb(free)
            );
            out.push(TierPlan { tier: tier.clone(), copy: vec![], keep: vec![], refused: Some(refused) });
            continue;
        }
        left -= need;
        present.extend(wanted.iter().map(|w| w.name.as_str()));
        out.push(TierPlan { tier: tier.clone(), copy, keep, refused: None });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(name: &str, size: u64, sha: &str) -> Wanted {
        Wanted { name: name.into(), size, extra: 0, sha256: Some(sha.into()) }
    }

    #[test]
    fn shared_models_are_copied_once_for_the_lowest_tier() {
        let tiers = vec![
            ("fast".to_string(), Ok(vec![w("det", 10, "a"), w("swap", 50, "b")])),
            ("quality".to_string(), Ok(vec![w("det", 10, "a"), w("swap", 50, "b"), w("enh", 30, "c")])),
        ];
        let p = plan(&tiers, &StagedIndex::new(), 1000);
        assert_eq!(p[0].copy, vec!["det", "swap"]);
        assert_eq!(p[1].copy, vec!["enh"]);
        assert!(p.iter().all(|t| t.refused.is_none()));
    }

    #[test]
    fn files_staged_with_the_right_hash_are_kept_and_others_recopied() {
        let mut staged = StagedIndex::new();
        staged.insert("det".into(), ("a".into(), 10));
        staged.insert("swap".into(), ("stale".into(), 50));
        let tiers = vec![("fast".to_string(), Ok(vec![w("det", 10, "a"), w("swap", 50, "b")]))];
        let p = plan(&tiers, &staged, 1000);
        assert_eq!(p[0].keep, vec!["det"]);
        assert_eq!(p[0].copy, vec!["swap"]);
    }

    #[test]
    fn a_tier_that_does_not_fit_is_refused_with_sizes_and_others_go_on() {
        let tiers = vec![
            ("fast".to_string(), Ok(vec![w("det", 10_000_000, "a")])),
            ("quality".to_string(), Ok(vec![w("det", 10_000_000, "a"), w("big", 500_000_000, "c")])),
            ("broken".to_string(), Err("model `x` is in no manifest".to_string())),
        ];
        let p = plan(&tiers, &StagedIndex::new(), 100_000_000);
        assert!(p[0].refused.is_none());
        let why = p[1].refused.as_deref().unwrap();
        assert!(why.contains("500.0 MB") && why.contains("90.0 MB"), "{why}");
        assert_eq!(p[2].refused.as_deref(), Some("model `x` is in no manifest"));
    }

    #[test]
    fn a_model_without_a_manifest_hash_is_always_copied() {
        let mut staged = StagedIndex::new();
        staged.insert("det".into(), ("a".into(), 10));
        let tiers =
            vec![("fast".to_string(), Ok(vec![Wanted { name: "det".into(), size: 10, extra: 0, sha256: None }]))];
        assert_eq!(plan(&tiers, &staged, 100)[0].copy, vec!["det"]);
    }
}

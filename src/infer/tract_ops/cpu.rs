//! The one place fusiond's kernels learn what the CPU offers. The CPU's
//! features are detected once, then capped by `FUSIOND_CPU`, so a lower
//! tier can be forced for tests and side-by-side figures:
//!
//! - `scalar`: the plain loops only;
//! - `avx2`: AVX2 and FMA, with AVX-VNNI where the CPU has it (an Intel
//!   N100's set);
//! - `avx512` or unset: everything the CPU has.
//!
//! Every vector path dispatches on [`has`]. A kernel's own safety check
//! (the assert before it calls its vector code) asks the CPU itself, since a cap
//! only ever takes features away.

use std::sync::OnceLock;

/// A CPU feature a kernel needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feature {
    /// AVX2 with FMA.
    Avx2,
    /// AVX-VNNI: 8-bit dot products on 256-bit vectors.
    AvxVnni,
    Avx512F,
    Avx512Bw,
    Avx512Vnni,
}

/// How far `FUSIOND_CPU` lets the kernels go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tier {
    Scalar,
    Avx2,
    Avx512,
}

impl Tier {
    /// `FUSIOND_CPU`'s value; `None` for one it does not know.
    pub fn parse(value: &str) -> Option<Tier> {
        match value.trim().to_ascii_lowercase().as_str() {
            "scalar" => Some(Tier::Scalar),
            "avx2" => Some(Tier::Avx2),
            "avx512" | "native" | "" => Some(Tier::Avx512),
            _ => None,
        }
    }

    fn allows(self, feature: Feature) -> bool {
        match feature {
            Feature::Avx2 | Feature::AvxVnni => self >= Tier::Avx2,
            Feature::Avx512F | Feature::Avx512Bw | Feature::Avx512Vnni => self >= Tier::Avx512,
        }
    }
}

/// What the CPU has, before any cap.
#[cfg(target_arch = "x86_64")]
fn detected(feature: Feature) -> bool {
    use std::arch::is_x86_feature_detected as has;
    match feature {
        Feature::Avx2 => has!("avx2") && has!("fma"),
        Feature::AvxVnni => has!("avx2") && has!("avxvnni"),
        Feature::Avx512F => has!("avx512f"),
        Feature::Avx512Bw => has!("avx512f") && has!("avx512bw"),
        Feature::Avx512Vnni => has!("avx512f") && has!("avx512vnni"),
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn detected(_: Feature) -> bool {
    false
}

/// The cap, read once from `FUSIOND_CPU`; an unknown value is logged and
/// caps nothing.
pub fn tier() -> Tier {
    static TIER: OnceLock<Tier> = OnceLock::new();
    *TIER.get_or_init(|| {
        let value = std::env::var("FUSIOND_CPU").unwrap_or_default();
        let tier = Tier::parse(&value).unwrap_or_else(|| {
            log::warn!("FUSIOND_CPU={value} is not scalar, avx2 or avx512; the kernels use every feature the CPU has");
            Tier::Avx512
        });
        log::debug!("fusiond kernels: {}", describe_with(tier));
        tier
    })
}

/// Whether the kernels may use `feature`: the CPU has it and the cap allows it.
pub fn has(feature: Feature) -> bool {
    tier().allows(feature) && detected(feature)
}

/// The features the kernels use, for logs and test output
/// (`avx2 avxvnni avx512f …`, or `scalar`).
pub fn describe() -> String {
    describe_with(tier())
}

fn describe_with(tier: Tier) -> String {
    let all = [
        (Feature::Avx2, "avx2"),
        (Feature::AvxVnni, "avxvnni"),
        (Feature::Avx512F, "avx512f"),
        (Feature::Avx512Bw, "avx512bw"),
        (Feature::Avx512Vnni, "avx512vnni"),
    ];
    let used: Vec<&str> = all.iter().filter(|(f, _)| tier.allows(*f) && detected(*f)).map(|(_, n)| *n).collect();
    let cap = match tier {
        Tier::Scalar => " (FUSIOND_CPU=scalar)",
        Tier::Avx2 => " (FUSIOND_CPU=avx2)",
        Tier::Avx512 => "",
    };
    if used.is_empty() {
        format!("scalar{cap}")
    } else {
        format!("{}{cap}", used.join(" "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_is_parsed_and_only_ever_takes_features_away() {
        assert_eq!(Tier::parse("scalar"), Some(Tier::Scalar));
        assert_eq!(Tier::parse(" AVX2 "), Some(Tier::Avx2));
        assert_eq!(Tier::parse(""), Some(Tier::Avx512));
        assert_eq!(Tier::parse("neon"), None);
        let features = [Feature::Avx2, Feature::AvxVnni, Feature::Avx512F, Feature::Avx512Bw, Feature::Avx512Vnni];
        assert!(features.iter().all(|f| !Tier::Scalar.allows(*f)));
        assert!(Tier::Avx2.allows(Feature::Avx2) && Tier::Avx2.allows(Feature::AvxVnni));
        assert!(!Tier::Avx2.allows(Feature::Avx512F) && !Tier::Avx2.allows(Feature::Avx512Vnni));
        assert!(features.iter().all(|f| Tier::Avx512.allows(*f)));
        for f in features {
            assert!(!has(f) || detected(f), "{f:?} is used only where the CPU has it");
        }
    }

    /// Names the tier this test binary's kernels run at in the test log
    /// (`cargo test -- --nocapture`, as tests/run.sh runs each tier).
    #[test]
    fn the_kernel_tier_is_named() {
        let said = describe();
        eprintln!("fusiond kernels: {said}");
        match tier() {
            Tier::Scalar => assert!(said.starts_with("scalar")),
            Tier::Avx2 => assert!(!said.contains("avx512")),
            Tier::Avx512 => assert!(!said.contains("FUSIOND_CPU")),
        }
    }
}

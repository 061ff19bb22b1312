//! The one place the kernels learn what the CPU offers. The CPU's features
//! are detected once, then capped by `FUSIOND_CPU`, so a lower tier can be
//! forced for tests and side-by-side figures:
//!
//! | `FUSIOND_CPU` | x86_64 | aarch64 |
//! |---|---|---|
//! | `scalar` | the plain loops only | the plain loops only |
//! | `avx2` or `neon` | AVX2 and FMA, with AVX-VNNI where the CPU has it (an Intel N100's set) | NEON (Advanced SIMD) |
//! | `avx512`, `dotprod` or unset | everything the CPU has | NEON, dot product and FP16 where the CPU has them |
//!
//! Every vector path dispatches on [`has`]. A kernel's own safety check
//! (the assert before it calls its vector code) asks the CPU itself, since a
//! cap only ever takes features away. An unknown value caps nothing;
//! [`override_problem`] says so, for the caller to log.

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
    /// aarch64's Advanced SIMD.
    Neon,
    /// aarch64's `sdot`/`udot` (Armv8.2 DotProd).
    Dotprod,
    /// aarch64's half-precision arithmetic (Armv8.2 FP16).
    Fp16,
}

const ALL: [(Feature, &str); 8] = [
    (Feature::Avx2, "avx2"),
    (Feature::AvxVnni, "avxvnni"),
    (Feature::Avx512F, "avx512f"),
    (Feature::Avx512Bw, "avx512bw"),
    (Feature::Avx512Vnni, "avx512vnni"),
    (Feature::Neon, "neon"),
    (Feature::Dotprod, "dotprod"),
    (Feature::Fp16, "fp16"),
];

/// How far `FUSIOND_CPU` lets the kernels go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tier {
    /// The plain loops only.
    Scalar,
    /// The first vector tier: AVX2 (with AVX-VNNI) or NEON.
    Vector,
    /// Everything the CPU has.
    All,
}

impl Tier {
    /// `FUSIOND_CPU`'s value; `None` for one it does not know.
    pub fn parse(value: &str) -> Option<Tier> {
        match value.trim().to_ascii_lowercase().as_str() {
            "scalar" => Some(Tier::Scalar),
            "avx2" | "neon" => Some(Tier::Vector),
            "avx512" | "dotprod" | "native" | "" => Some(Tier::All),
            _ => None,
        }
    }

    fn allows(self, feature: Feature) -> bool {
        match feature {
            Feature::Avx2 | Feature::AvxVnni | Feature::Neon => self >= Tier::Vector,
            Feature::Avx512F | Feature::Avx512Bw | Feature::Avx512Vnni | Feature::Dotprod | Feature::Fp16 => {
                self >= Tier::All
            }
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
        Feature::Neon | Feature::Dotprod | Feature::Fp16 => false,
    }
}

/// What the CPU has, before any cap.
#[cfg(target_arch = "aarch64")]
fn detected(feature: Feature) -> bool {
    use std::arch::is_aarch64_feature_detected as has;
    match feature {
        Feature::Neon => has!("neon"),
        Feature::Dotprod => has!("neon") && has!("dotprod"),
        Feature::Fp16 => has!("neon") && has!("fp16"),
        _ => false,
    }
}

/// Other CPUs (armv7 among them): the plain loops, which the compiler
/// vectorises for the build's baseline.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn detected(_: Feature) -> bool {
    false
}

/// The cap as `FUSIOND_CPU` set it: the tier and the value that set it
/// (empty where none did), or what was wrong with the value.
struct Cap {
    tier: Tier,
    value: String,
    problem: Option<String>,
}

fn cap() -> &'static Cap {
    static CAP: OnceLock<Cap> = OnceLock::new();
    CAP.get_or_init(|| {
        let value = std::env::var("FUSIOND_CPU").unwrap_or_default().trim().to_string();
        match Tier::parse(&value) {
            Some(tier) => Cap { tier, value, problem: None },
            None => Cap {
                tier: Tier::All,
                problem: Some(format!(
                    "FUSIOND_CPU={value} is not scalar, avx2, avx512, neon or dotprod; \
                     the kernels use every feature the CPU has"
                )),
                value: String::new(),
            },
        }
    })
}

/// The cap, read once from `FUSIOND_CPU`.
pub fn tier() -> Tier {
    cap().tier
}

/// What was wrong with `FUSIOND_CPU`, if anything, for the caller to log.
pub fn override_problem() -> Option<&'static str> {
    cap().problem.as_deref()
}

/// Whether the kernels may use `feature`: the CPU has it and the cap allows it.
pub fn has(feature: Feature) -> bool {
    tier().allows(feature) && detected(feature)
}

/// The features the kernels may use, for logs and test output
/// (`avx2 avxvnni avx512f …`, `neon dotprod fp16`, or `scalar`), with the
/// cap where one is set.
pub fn describe() -> String {
    describe_with(tier())
}

fn describe_with(tier: Tier) -> String {
    let used: Vec<&str> = ALL.iter().filter(|(f, _)| tier.allows(*f) && detected(*f)).map(|(_, n)| *n).collect();
    let cap = match cap().value.as_str() {
        "" => String::new(),
        value => format!(" (FUSIOND_CPU={value})"),
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
        assert_eq!(Tier::parse(" AVX2 "), Some(Tier::Vector));
        assert_eq!(Tier::parse("neon"), Some(Tier::Vector));
        assert_eq!(Tier::parse("dotprod"), Some(Tier::All));
        assert_eq!(Tier::parse(""), Some(Tier::All));
        assert_eq!(Tier::parse("sse2"), None);
        let features = ALL.map(|(f, _)| f);
        assert!(features.iter().all(|f| !Tier::Scalar.allows(*f)));
        assert!(Tier::Vector.allows(Feature::Avx2) && Tier::Vector.allows(Feature::AvxVnni));
        assert!(Tier::Vector.allows(Feature::Neon) && !Tier::Vector.allows(Feature::Dotprod));
        assert!(!Tier::Vector.allows(Feature::Avx512F) && !Tier::Vector.allows(Feature::Avx512Vnni));
        assert!(features.iter().all(|f| Tier::All.allows(*f)));
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
            Tier::Vector => assert!(!said.contains("avx512") && !said.contains("dotprod")),
            Tier::All => assert!(override_problem().is_some() || !said.contains("FUSIOND_CPU=scalar")),
        }
    }
}

//! `fusiond cost`, the program benches/arm-cost.sh counts the instructions
//! of under qemu: one model or one live frame, N runs, and what ran them.

use crate::util::{contract_models, fusiond_command, shared};

fn cost(args: &[&str]) -> serde_json::Value {
    let out = fusiond_command().arg("cost").args(args).output().expect("fusiond runs");
    assert!(out.status.success(), "fusiond cost {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.lines().last().expect("one JSON line")).expect("JSON")
}

fn kernels(v: &serde_json::Value) -> Vec<String> {
    serde_json::from_value(v["kernels"].clone()).expect("a list of kernels")
}

#[test]
fn a_model_names_the_kernels_its_plan_runs_on_stock_and_fused_ops() {
    let models = shared("models");
    let models = models.to_str().unwrap();
    let fused = cost(&["model", "yunet_2023mar", "--runs", "1", "--models", models]);
    let stock = cost(&["model", "yunet_2023mar", "--runs", "0", "--models", models, "--tract-stock-ops"]);
    assert_eq!(fused["placement"]["engine"], "tract");
    let (fused, stock) = (kernels(&fused), kernels(&stock));
    // Each entry is a kernel and the number of plan nodes that run it.
    for k in fused.iter().chain(&stock) {
        let (_, n) = k.rsplit_once(" ×").expect("name ×count");
        assert!(n.parse::<usize>().unwrap() > 0, "{k}");
    }
    assert!(fused.iter().any(|k| k.starts_with("Fusiond")), "fusiond's ops run by default: {fused:?}");
    assert!(!stock.iter().any(|k| k.starts_with("Fusiond")), "stock tract runs none of them: {stock:?}");
    assert!(stock.iter().any(|k| k.contains("mmm")), "tract's matrix kernels are named: {stock:?}");
}

#[test]
fn a_frame_runs_the_whole_live_path_on_every_face() {
    let cm = contract_models();
    let v = cost(&[
        "frame",
        "--frame",
        shared("images/fr_two_people.jpg").to_str().unwrap(),
        "--source",
        shared("images/fr_biden.jpg").to_str().unwrap(),
        "--swapper",
        "latent_color_swapper",
        "--runs",
        "1",
        "--models",
        shared("models").to_str().unwrap(),
        "--models",
        cm.to_str().unwrap(),
    ]);
    assert_eq!(v["faces"], 2, "{v}");
    assert_eq!(v["runs"], 1);
}

#[test]
fn a_model_that_is_not_there_is_an_error() {
    let out = fusiond_command()
        .args(["cost", "model", "no_such_model", "--models", shared("models").to_str().unwrap()])
        .output()
        .expect("fusiond runs");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no_such_model"));
}

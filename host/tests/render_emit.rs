//! Render and emit on a hand-built checked plan (see `fixture`): region order, names,
//! payloads, the residency report, determinism and untouched output on failure.

mod fixture;

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use memplan::render::{render, RenderOptions, RenderPlan, Segment};
use memplan::ErrorKind;
use memplan_plugin_api::ArenaRole;

fn options(external_arenas: bool) -> RenderOptions {
    RenderOptions {
        prefix: "demo".to_string(),
        external_arenas,
        planner: "fixture".to_string(),
        planners: Vec::new(),
        emit_tflite: false,
    }
}

fn rendered(external_arenas: bool) -> RenderPlan {
    let (analysis, checked) = fixture::demo();
    render(&analysis, &checked, &options(external_arenas)).expect("the fixture renders")
}

fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            let entry = entry.unwrap();
            (
                entry.file_name().to_string_lossy().into_owned(),
                fs::read(entry.path()).unwrap(),
            )
        })
        .collect()
}

#[test]
fn regions_follow_role_then_memory_order_with_c_names() {
    let plan = rendered(false);
    let regions: Vec<(usize, ArenaRole, &str, &str, &str)> = plan
        .regions
        .iter()
        .map(|region| {
            (
                region.id,
                region.role,
                region.memory.as_str(),
                region.source_memory.as_str(),
                region.c_name.as_str(),
            )
        })
        .collect();
    assert_eq!(
        regions,
        [
            (0, ArenaRole::Scratch, "DTCM", "DTCM", "demo_arena_dtcm"),
            (1, ArenaRole::Scratch, "SRAM", "SRAM", "demo_arena_sram"),
            (
                2,
                ArenaRole::Persistent,
                "SRAM",
                "SRAM",
                "demo_arena_persistent_sram"
            ),
            (
                3,
                ArenaRole::Constant,
                "MRAM",
                "MRAM",
                "demo_arena_const_mram"
            ),
            (
                4,
                ArenaRole::Constant,
                "SRAM",
                "MRAM",
                "demo_arena_const_sram"
            ),
        ]
    );
    // Lower bounds travel with their arena, not with the plan's arena order.
    let bounds: Vec<u64> = plan
        .regions
        .iter()
        .map(|region| region.lower_bound)
        .collect();
    assert_eq!(bounds, [768, 256, 64, 320, 160]);
    assert_eq!(plan.regions[3].constant_kind(), Some("cold"));
    assert_eq!(plan.regions[4].constant_kind(), Some("staged"));
    let payloads: Vec<(&str, &str)> = plan
        .regions
        .iter()
        .filter_map(|region| region.payload.as_ref())
        .map(|payload| (payload.symbol.as_str(), payload.sidecar.as_str()))
        .collect();
    assert_eq!(
        payloads,
        [
            (
                "demo_arena_const_mram__blob",
                "demo_arena_const_mram__blob.bin"
            ),
            (
                "demo_arena_const_sram__source",
                "demo_arena_const_sram__source.bin"
            ),
        ]
    );
}

#[test]
fn tensors_get_unique_c_names_and_empty_tensors_no_region() {
    let plan = rendered(false);
    let names: Vec<&str> = plan
        .tensors
        .iter()
        .map(|tensor| tensor.c_name.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "demo_tensor_input_0",
            "demo_tensor_1",
            "demo_tensor_2",
            "demo_tensor_output",
            "demo_tensor_w_conv_0_2",
            "demo_tensor_bias",
            "demo_tensor_table",
            "demo_tensor_state",
            "demo_tensor_view",
            "demo_tensor_empty",
            "demo_tensor_w_conv_0",
        ]
    );
    let empty = &plan.tensors[9];
    assert_eq!((empty.region, empty.size), (None, 0));
    assert_eq!(
        plan.tensors[8].region,
        Some(0),
        "an alias lives in its root's region"
    );
    assert_eq!(plan.tensors[4].region, Some(4));
}

#[test]
fn constant_blobs_hold_each_constant_at_its_offset() {
    let plan = rendered(false);
    let cold = plan.regions[3].payload.as_ref().unwrap();
    assert_eq!(cold.bytes.len(), 320);
    assert_eq!(cold.bytes[..300], fixture::constant_bytes(6, 300)[..]);
    assert_eq!(cold.bytes[300..304], [0, 0, 0, 0]);
    assert_eq!(cold.bytes[304..320], fixture::constant_bytes(10, 16)[..]);
    assert_eq!(
        cold.segments,
        [
            Segment::Tensor {
                tensor: 6,
                offset: 0,
                size: 300
            },
            Segment::Padding {
                offset: 300,
                size: 4
            },
            Segment::Tensor {
                tensor: 10,
                offset: 304,
                size: 16
            },
        ]
    );
    let staged = plan.regions[4].payload.as_ref().unwrap();
    assert_eq!(staged.bytes[..100], fixture::constant_bytes(4, 100)[..]);
    assert_eq!(staged.bytes[112..152], fixture::constant_bytes(5, 40)[..]);
    assert!(staged.bytes[100..112]
        .iter()
        .chain(&staged.bytes[152..])
        .all(|&b| b == 0));
}

#[test]
fn a_prefix_that_is_not_a_c_identifier_is_a_usage_error() {
    let (analysis, checked) = fixture::demo();
    let mut options = options(false);
    options.prefix = "my-model".to_string();
    let error = render(&analysis, &checked, &options).unwrap_err();
    assert_eq!(error.kind, ErrorKind::Input);
    assert!(error.message.contains("--prefix `my-model`"), "{error}");
}

#[test]
fn residency_report_describes_regions_and_tensors() {
    let plan = rendered(true);
    let out = fixture::temp_dir("residency");
    memplan::emit::emit(&plan, &out.join("out")).unwrap();
    let text = fs::read_to_string(out.join("out/demo_residency.json")).unwrap();
    let residency: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(residency["plan_hash"], plan.plan_hash.as_str());
    assert_eq!(
        residency["tensor_layout_hash"],
        plan.tensor_layout_hash.as_str()
    );
    let scratch = &residency["arenas"]["scratch"][0];
    assert_eq!(scratch["memory"], "DTCM");
    assert_eq!(scratch["total_size"], 768);
    assert_eq!(scratch["used"], 768);
    assert_eq!(scratch["peak_live"], 768);
    let staged = &residency["arenas"]["constant"][1];
    assert_eq!(staged["kind"], "staged");
    assert_eq!(staged["source_memory"], "MRAM");
    assert_eq!(staged["tensor_count"], 2);
    assert_eq!(staged["sidecar"], "demo_arena_const_sram__source.bin");
    let tensors = residency["tensors"].as_array().unwrap();
    assert_eq!(tensors.len(), 11);
    assert_eq!(tensors[8]["alias_of"], "1");
    assert_eq!(tensors[9]["region_id"], serde_json::Value::Null);
    // Schema 2: the name and C name only where they say more than the id, the lifetime as
    // `steps`, one tensor per line.
    assert_eq!(residency["schema_version"], 2);
    assert_eq!(tensors[1]["name"], "conv1/out");
    assert_eq!(tensors[1]["steps"], serde_json::json!([1, 2]));
    assert!(tensors[1].get("c_name").is_none(), "{}", tensors[1]);
    assert!(tensors[2].get("name").is_none(), "{}", tensors[2]);
    assert_eq!(tensors[0]["c_name"], "demo_tensor_input_0");
    assert!(tensors[0].get("memory").is_none(), "{}", tensors[0]);
    assert!(
        text.lines()
            .any(|line| line.trim_start().starts_with("{\"id\":\"output\"")),
        "{text}"
    );
    let sidecar = fs::read(out.join("out/demo_arena_const_sram__source.bin")).unwrap();
    assert_eq!(sidecar, plan.regions[4].payload.as_ref().unwrap().bytes);
    fs::remove_dir_all(&out).unwrap();
}

#[test]
fn two_runs_write_byte_identical_files() {
    for external in [false, true] {
        let root = fixture::temp_dir(&format!("deterministic-{external}"));
        memplan::emit::emit(&rendered(external), &root.join("a")).unwrap();
        memplan::emit::emit(&rendered(external), &root.join("b")).unwrap();
        let (a, b) = (snapshot(&root.join("a")), snapshot(&root.join("b")));
        assert_eq!(a, b);
        let bins = a.keys().filter(|name| name.ends_with(".bin")).count();
        assert_eq!(bins, if external { 2 } else { 0 });
        assert_eq!(a.len(), 6 + bins + 1, "the files and the manifest");
        fs::remove_dir_all(&root).unwrap();
    }
}

#[test]
fn a_failed_run_leaves_the_previous_output_untouched() {
    let root = fixture::temp_dir("failed-run");
    let out = root.join("out");
    memplan::emit::emit(&rendered(false), &out).unwrap();
    let before = snapshot(&out);

    // A constant whose bytes do not match its size makes render fail: emit never runs.
    let (mut analysis, checked) = fixture::demo();
    analysis.constant_data[6] = Some(vec![1, 2, 3]);
    let error = render(&analysis, &checked, &options(true)).unwrap_err();
    assert_eq!(error.kind, ErrorKind::Input);
    assert!(error.message.contains("`table`"), "{error}");
    assert_eq!(snapshot(&out), before);

    // A directory holding something memplan did not write is never replaced.
    fs::write(out.join("notes.txt"), b"mine").unwrap();
    let before = snapshot(&out);
    let error = memplan::emit::emit(&rendered(true), &out).unwrap_err();
    assert_eq!(error.kind, ErrorKind::Input);
    assert_eq!(snapshot(&out), before);
    let siblings: Vec<String> = snapshot_names(&root);
    assert_eq!(siblings, ["out"]);
    fs::remove_dir_all(&root).unwrap();
}

fn snapshot_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn layout_picture_has_a_panel_per_region_and_a_rectangle_per_tensor() {
    let plan = rendered(false);
    let root = fixture::temp_dir("svg");
    memplan::emit::emit(&plan, &root.join("out")).unwrap();
    let svg = fs::read_to_string(root.join("out/demo_layout.svg")).unwrap();
    assert!(svg.starts_with("<svg ") && svg.trim_end().ends_with("</svg>"));
    assert_eq!(svg.matches("<g id=").count(), plan.regions.len());
    assert_eq!(
        svg.matches("<title>lower bound:").count(),
        plan.regions.len()
    );
    // Every tensor with bytes of its own has a rectangle with a tooltip; aliases and empty
    // tensors do not.
    for tensor in &plan.tensors {
        let tooltip = format!(": {} bytes @ offset {}, steps", tensor.size, tensor.offset);
        let drawn = tensor.alias_of.is_none() && tensor.size > 0;
        assert_eq!(svg.contains(&tooltip), drawn, "tensor {}", tensor.id);
    }
    assert!(svg.contains("conv1/out (id 1): 512 bytes @ offset 256, steps 1-2"));
    fs::remove_dir_all(&root).unwrap();
}

fn report() -> memplan::report::plan::RunReport {
    memplan::report::plan::RunReport {
        planner: "greedy-bestfit".to_string(),
        planner_file: "/opt/memplan/libgreedy.so".into(),
        shadowed_files: vec!["/home/me/plugins/libgreedy.so".into()],
        planner_summary: "hand-made".to_string(),
        candidates: Vec::new(),
        timings: vec![
            ("plan", std::time::Duration::from_micros(1500)),
            ("emit", std::time::Duration::from_micros(500)),
        ],
        out: "out".into(),
        files: vec!["demo_tensors.h".to_string()],
    }
}

#[test]
fn json_summary_carries_arenas_hashes_planner_and_timings() {
    let plan = rendered(false);
    let mut stdout = Vec::new();
    memplan::report::plan::write_json(&plan, &report(), &mut stdout).unwrap();
    let summary: serde_json::Value = serde_json::from_slice(&stdout).unwrap();
    assert_eq!(summary["plan_hash"], plan.plan_hash.as_str());
    assert_eq!(
        summary["tensor_layout_hash"],
        plan.tensor_layout_hash.as_str()
    );
    assert_eq!(summary["planner"], "greedy-bestfit");
    assert_eq!(summary["planner_file"], "/opt/memplan/libgreedy.so");
    assert_eq!(
        summary["shadowed_files"],
        serde_json::json!(["/home/me/plugins/libgreedy.so"])
    );
    assert_eq!(summary["timings_ms"]["plan"], 1.5);
    assert_eq!(summary["timings_ms"]["total"], 2.0);
    let arenas = summary["arenas"].as_array().unwrap();
    assert_eq!(arenas.len(), plan.regions.len());
    let staged = &arenas[4];
    assert_eq!(staged["role"], "constant");
    assert_eq!(staged["memory"], "SRAM");
    assert_eq!(staged["source_memory"], "MRAM");
    assert_eq!(staged["kind"], "staged");
    assert_eq!(staged["size"], 160);
    assert_eq!(staged["alignment"], 16);
    assert_eq!(staged["lower_bound"], 160);
    assert_eq!(arenas[0]["budget"], 65536);
    assert_eq!(arenas[0]["budget_use_percent"], 1.17); // 768 / 65536
}

#[test]
fn text_summary_has_a_line_per_region() {
    // Give the DTCM arena slack above its lower bound (768 bytes) two ways: its highest
    // tensor moved up by 128 bytes (fragmentation: the placement spends more), and the arena
    // rounded up to 1024 (not fragmentation: `used` is what the placement needs).
    let (analysis, mut checked) = fixture::demo();
    let dtcm = checked
        .plan
        .arenas
        .iter()
        .position(|arena| arena.memory == fixture::DTCM)
        .unwrap();
    checked.plan.arenas[dtcm].size = 1024;
    let dtcm_memory = checked.plan.arenas[dtcm].memory;
    let top = checked
        .plan
        .allocations
        .iter()
        .enumerate()
        .filter(|(_, allocation)| {
            allocation.binding.role == memplan_plugin_api::ArenaRole::Scratch
                && allocation.binding.memory == dtcm_memory
        })
        .max_by_key(|(_, allocation)| allocation.offset + allocation.size)
        .map(|(index, _)| index)
        .unwrap();
    checked.plan.allocations[top].offset += 128;
    checked.plan.allocations[top].binding.offset += 128;
    let plan = render(&analysis, &checked, &options(false)).unwrap();
    let mut stdout = Vec::new();
    memplan::report::plan::write_text(&plan, &report(), &mut stdout).unwrap();
    let text = String::from_utf8(stdout).unwrap();
    assert!(text.contains(&plan.plan_hash), "{text}");
    assert!(text.contains("greedy-bestfit (hand-made)"), "{text}");
    assert!(
        text.contains(
            "planner `greedy-bestfit` from /opt/memplan/libgreedy.so, which shadows the one in \
             /home/me/plugins/libgreedy.so"
        ),
        "{text}"
    );
    let dtcm_line = text
        .lines()
        .find(|line| line.contains("scratch") && line.contains("DTCM"))
        .expect("a DTCM line");
    // 1024 bytes, lower bound 768, used 896: 128 / 1024 = 12.5% fragmentation (the 128 bytes
    // of rounding are not counted); 1024 / 65536 of the budget.
    for expected in ["1024", "768", "12.5%", "1.6%"] {
        assert!(dtcm_line.contains(expected), "{dtcm_line}");
    }
    assert!(text.contains("MRAM (staged)"), "{text}");
}

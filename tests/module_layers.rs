//! The crate's top-level modules import each other without cycles, `error` imports nothing of
//! the crate and `tensor` only `error`, and `cli` names only what its allowlist allows: read from the sources, so a new
//! import that breaks the layering fails here. Unit-test modules (`#[cfg(test)] mod tests`) are
//! left out.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use support::rust_files;

type Graph = BTreeMap<String, BTreeSet<String>>;

/// The library source of a file: everything before its unit-test module.
fn library_source(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

/// Which top-level modules each top-level module names through `crate::`.
fn module_graph() -> Graph {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = vec![];
    rust_files(&src, &mut files);
    let mut graph = Graph::new();
    for file in files {
        let rel = file.strip_prefix(&src).unwrap();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let top = first.trim_end_matches(".rs").to_string();
        if top == "lib" || top == "main" {
            continue;
        }
        let text = library_source(&file);
        let used = graph.entry(top.clone()).or_default();
        for (i, _) in text.match_indices("crate::") {
            let name: String = text[i + 7..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() && name != top {
                used.insert(name);
            }
        }
    }
    graph
}

/// A cycle through `graph`, if there is one, as the modules along it.
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &Graph,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(c) = visit(next, graph, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|n| visit(n, graph, &mut vec![], &mut done))
}

#[test]
fn top_level_modules_have_no_import_cycle() {
    let graph = module_graph();
    assert!(graph.len() >= 10, "{graph:?}");
    assert_eq!(find_cycle(&graph), None, "{graph:#?}");
    // The error type every layer raises is the one thing beneath the tensors.
    assert!(
        graph["error"].is_empty(),
        "error imports {:?}",
        graph["error"]
    );
    assert!(
        graph["tensor"].iter().all(|m| m == "error"),
        "tensor imports {:?}",
        graph["tensor"]
    );
    assert!(graph["onnx"]
        .iter()
        .all(|m| ["tensor", "atomic_file", "digest", "error"].contains(&m.as_str())));
}

#[test]
fn the_cycle_finder_finds_cycles() {
    let mut g = Graph::new();
    g.entry("a".into()).or_default().insert("b".into());
    g.entry("b".into()).or_default().insert("c".into());
    assert_eq!(find_cycle(&g), None);
    g.entry("c".into()).or_default().insert("a".into());
    assert_eq!(find_cycle(&g).unwrap().len(), 4);
}

/// What `cli/` may name of the rest of the crate. A module path allows the items directly in it,
/// a path ending in `::*` everything beneath it (and itself), any other path that one item. The
/// jobs' entry points with their config, report and error types, `report/` (renderers, progress
/// bars), the workspace settings, and the plain value types the configs are made of; no
/// backend openers, data loaders, journal readers or cache decisions.
const CLI_MAY_NAME: &[&str] = &[
    "crate::cli::*",
    "crate::report::*",
    "crate::error",
    "crate::tensor",
    // The value parser of float flags (bench's settings use it too).
    "crate::number",
    "crate::progress::Progress",
    // Where outputs may be written, checked before any work.
    "crate::output_path",
    // The jobs.
    "crate::jobs::build",
    "crate::jobs::compare",
    "crate::jobs::doctor::check",
    "crate::jobs::inspect",
    "crate::jobs::layerwise",
    "crate::jobs::layerwise::all",
    "crate::jobs::quantize",
    "crate::jobs::quantize::request",
    "crate::jobs::precision_compare",
    "crate::jobs::precision_table",
    "crate::jobs::run",
    "crate::jobs::validate",
    "crate::onnx::macs::MacsUnknown",
    "crate::quantize::plan",
    "crate::quantize::evaluate::EvalConfig",
    "crate::quantize::evaluate::WeightRounding",
    "crate::quantize::eval_config::CheckSet",
    "crate::quantize::eval_config::DEFAULT_CHECK_FRACTION",
    "crate::quantize::scale_search::ScaleSearch",
    "crate::quantize::target_search::Goal",
    "crate::quantize::target_search::Strategy",
    "crate::quantize::target_search::TargetConfig",
    "crate::quantize::fp16_search::Fp16TargetConfig",
    "crate::jobs::calibrate",
    "crate::calibration::range",
    "crate::jobs::doctor",
    "crate::bench::matrix",
    "crate::bench::journal::main_journal",
    "crate::bench::plan",
    "crate::bench::record::CellRecord",
    "crate::backend::select::Runtime",
    "crate::bench::supervise::run_in_child",
    "crate::bench::slurm_follow",
    "crate::bench::slurm::SlurmOptions",
    "crate::bench::slurm::shell_word",
    "crate::bench::devices::DeviceRequest",
    "crate::workspace",
    "crate::jobs::init",
    // Value types of the configs.
    "crate::trt::engine_file::BuilderSettings",
    "crate::trt::loader::DIR_ENV",
    "crate::trt::profile::AxisRange",
    "crate::trt::profile::BatchRange",
    "crate::trt::profile::BatchRequest",
    "crate::trt::profile::ExplicitShapes",
    "crate::backend::Device",
    "crate::backend::select::BackendKind",
    "crate::backend::select::BackendOptions",
    "crate::backend::select::Fp16Compute",
    "crate::backend::select::TransformerFusionPolicy",
    "crate::backend::ort_cuda_tuning::ConvAlgoSearch",
    "crate::backend::ort_cuda_tuning::CudnnWorkspace",
    "crate::backend::ort_cuda_tuning::FusionPolicy",
    "crate::backend::ort_cuda_tuning::LayoutPolicy",
    "crate::backend::ort_cuda_tuning::OrtCudaTuning",
    "crate::backend::select::default_kind",
    "crate::backend::select::default_calibration_kind",
    "crate::cuda::harness::Amount",
    "crate::cuda::harness::HarnessOptions",
    "crate::data::dataset::DatasetOptions",
    "crate::data::preprocess::ChannelOrder",
    "crate::data::preprocess::Layout",
    "crate::data::preprocess::PreprocessRequest",
    "crate::data::resize::Interpolation",
    "crate::data::synthetic::InputDistribution",
    "crate::data::synthetic::RandomInputs",
    "crate::metrics::closeness::Tolerance",
    "crate::metrics::detection::boxes::BoxFormat",
    "crate::metrics::detection::decode::HeadLayout",
    "crate::metrics::detection::outputs::DetectOptions",
    "crate::metrics::task::Task",
    "crate::metrics::task::TaskRequest",
    "crate::data::dataset::Annotations",
    "crate::onnx::rewrite::fp16::DEFAULT_KEEP_FP32",
    "crate::onnx::rewrite::fp16::Fp16Options",
    "crate::onnx::rewrite::plan::Exclusion",
    "crate::onnx::rewrite::qdq::WeightClip",
    "crate::onnx::rewrite::qdq::WeightClipping",
    "crate::onnx::shape::DimRange",
    "crate::onnx::shape::DimSweep",
    "crate::onnx::shape::DimValues",
    "crate::onnx::shape::InputShape",
    "crate::onnx::shape::NamedDim",
    "crate::onnx::shape::ShapeRequest",
    "crate::onnx::shape::parse_dim_ranges",
    "crate::onnx::shape::parse_input_shapes",
    "crate::onnx::shape::parse_named_shapes",
];

/// Whether `path` (a full `crate::…` path) is one `allowed` lets `cli/` name.
fn may_name(allowed: &[&str], path: &str) -> bool {
    allowed.iter().any(|entry| match entry.strip_suffix("::*") {
        Some(module) => path == module || path.starts_with(&format!("{module}::")),
        None => {
            path == *entry
                || path
                    .strip_prefix(&format!("{entry}::"))
                    .is_some_and(|item| !item.contains("::"))
        }
    })
}

/// `prefix` joined with each path of a `use` group's inside (`a::b, c::{d, e}, f as g, self`).
fn expand_group(prefix: &str, group: &str, out: &mut Vec<String>) {
    let mut depth = 0;
    let mut start = 0;
    let mut parts = vec![];
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&group[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&group[start..]);
    for part in parts {
        let part = part.trim();
        let part = part.split(" as ").next().unwrap_or(part).trim();
        if part.is_empty() {
            continue;
        }
        match part.find('{') {
            Some(open) => {
                let inner = &part[open + 1..part.rfind('}').unwrap_or(part.len())];
                let head = part[..open].trim_end_matches("::");
                expand_group(&format!("{prefix}::{head}"), inner, out);
            }
            None if part == "self" => out.push(prefix.to_string()),
            None => out.push(format!("{prefix}::{part}")),
        }
    }
}

/// The library source of a file without its comment lines: a doc link is not an import.
fn code_lines(path: &Path) -> String {
    library_source(path)
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// For one folder of `src/` (as `module::path`), which of its files name which of its other
/// files (through `super::` or the folder's full `crate::` path).
fn file_graph(dir: &Path, module: &str) -> Graph {
    let entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let name = |p: &Path| p.file_stem().unwrap().to_string_lossy().to_string();
    let siblings: BTreeSet<String> = entries
        .iter()
        .filter(|p| p.is_dir() || p.extension().is_some_and(|e| e == "rs"))
        .map(|p| name(p))
        .filter(|n| n != "mod")
        .collect();
    let mut graph = Graph::new();
    for file in entries
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
    {
        let me = name(file);
        let text = code_lines(file);
        let mut prefixes = vec![format!("crate::{module}::")];
        if me != "mod" {
            prefixes.push("super::".to_string());
        }
        let used = graph.entry(me.clone()).or_default();
        for prefix in &prefixes {
            for (i, _) in text.match_indices(prefix.as_str()) {
                let next: String = text[i + prefix.len()..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if siblings.contains(&next) && next != me {
                    used.insert(next);
                }
            }
        }
    }
    graph
}

#[test]
fn files_of_a_module_import_each_other_without_cycles() {
    fn folders(dir: &Path, module: &str, out: &mut Vec<(std::path::PathBuf, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                let name = path.file_name().unwrap().to_string_lossy().to_string();
                let inner = if module.is_empty() {
                    name
                } else {
                    format!("{module}::{name}")
                };
                out.push((path.clone(), inner.clone()));
                folders(&path, &inner, out);
            }
        }
    }
    let mut all = vec![];
    folders(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        "",
        &mut all,
    );
    assert!(all.len() >= 10, "{all:?}");
    for (dir, module) in all {
        let graph = file_graph(&dir, &module);
        assert_eq!(find_cycle(&graph), None, "files of {module}: {graph:#?}");
    }
}

#[test]
fn the_file_graph_sees_super_and_full_paths() {
    let dir = std::env::temp_dir().join(format!("trtkit-layers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("a.rs"), "use super::b::B;\n").unwrap();
    std::fs::write(
        dir.join("b.rs"),
        "//! see [`super::a`]\nuse crate::m::c::C;\n",
    )
    .unwrap();
    std::fs::write(dir.join("c.rs"), "fn f() {}\n").unwrap();
    let graph = file_graph(&dir, "m");
    assert_eq!(find_cycle(&graph), None, "{graph:?}");
    assert!(
        graph["a"].contains("b") && graph["b"].contains("c"),
        "{graph:?}"
    );
    std::fs::write(dir.join("c.rs"), "use crate::m::a::A;\n").unwrap();
    assert!(find_cycle(&file_graph(&dir, "m")).is_some());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every `crate::…` path `text` names (comments left out), groups expanded.
fn crate_paths(text: &str) -> Vec<String> {
    let code: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = vec![];
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i..];
        let len = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(rest.len());
        let path = rest[..len].trim_end_matches("::");
        if rest[len..].starts_with('{') && rest[..len].ends_with("::") {
            let close = {
                let mut depth = 0;
                rest[len..]
                    .char_indices()
                    .find(|&(_, c)| {
                        depth += match c {
                            '{' => 1,
                            '}' => -1,
                            _ => 0,
                        };
                        depth == 0
                    })
                    .map_or(rest.len(), |(j, _)| len + j)
            };
            expand_group(path, &rest[len + 1..close], &mut out);
        } else {
            out.push(path.to_string());
        }
    }
    out
}

#[test]
fn cli_names_only_what_its_allowlist_allows() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/cli");
    let mut files = vec![];
    rust_files(&dir, &mut files);
    let mut named = 0;
    for file in files {
        for path in crate_paths(&library_source(&file)) {
            named += 1;
            assert!(
                may_name(CLI_MAY_NAME, &path),
                "{} names {path}, which cli/ may not (see CLI_MAY_NAME)",
                file.display()
            );
        }
    }
    assert!(
        named > 50,
        "only {named} paths found: is the reader broken?"
    );
}

#[test]
fn the_allowlist_reader_expands_groups_and_refuses_openers() {
    let text = "use crate::jobs::open::{open_backend, FileKind};\nuse crate::workspace::{self, Workspace};\n// [`crate::bench::journal`]\nlet x = crate::data::npz::save(p);\nuse crate::onnx::rewrite::{fp16::Fp16Options, plan::Exclusion as E};\n";
    assert_eq!(
        crate_paths(text),
        [
            "crate::jobs::open::open_backend",
            "crate::jobs::open::FileKind",
            "crate::workspace",
            "crate::workspace::Workspace",
            "crate::data::npz::save",
            "crate::onnx::rewrite::fp16::Fp16Options",
            "crate::onnx::rewrite::plan::Exclusion",
        ]
    );
    for refused in [
        "crate::jobs::open::open_backend",
        "crate::backend::select::open",
        "crate::backend::open",
        "crate::backend::open::open_file",
        "crate::backend::tract::TractBackend",
        "crate::data::npz::save",
        "crate::data::loader::Loader",
        "crate::bench::journal::read_files",
        "crate::workspace::artifacts::list",
        "crate::onnx::OnnxModel",
    ] {
        assert!(!may_name(CLI_MAY_NAME, refused), "{refused}");
    }
    for allowed in [
        "crate::workspace",
        "crate::workspace::Workspace",
        "crate::report::bench::render",
        "crate::report",
        "crate::jobs::compare::CompareConfig",
    ] {
        assert!(may_name(CLI_MAY_NAME, allowed), "{allowed}");
    }
}

/// The modules of `quantize/` whose functions run the INT8 searches.
const SEARCHES: &[&str] = &[
    "crate::quantize::adaptive_rounding",
    "crate::quantize::evaluate",
    "crate::quantize::eval_samples",
    "crate::quantize::scale_search",
    "crate::quantize::sensitivity_scan",
    "crate::quantize::target_search",
];

/// The search functions `text` names: paths into [`SEARCHES`] whose item is not a type or a
/// constant (types and constants start with a capital letter).
fn search_functions_named(text: &str) -> Vec<String> {
    crate_paths(text)
        .into_iter()
        .filter(|path| {
            SEARCHES.iter().any(|module| {
                path.strip_prefix(&format!("{module}::"))
                    .is_some_and(|item| !item.starts_with(|c: char| c.is_ascii_uppercase()))
            })
        })
        .collect()
}

#[test]
fn quantization_has_one_home_and_only_it_runs_the_searches() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for file in [
        "quantize/mod",
        "jobs/quantize/mod",
        "jobs/quantize/request",
        "quantize/evaluate",
        "quantize/eval_samples",
        "quantize/scale_search",
        "quantize/sensitivity_scan",
        "quantize/target_search",
    ] {
        assert!(src.join(format!("{file}.rs")).is_file(), "src/{file}.rs");
    }
    let mut files = vec![];
    rust_files(&src, &mut files);
    let mut outside = 0;
    for file in files {
        if file.starts_with(src.join("quantize")) || file.starts_with(src.join("jobs/quantize")) {
            continue;
        }
        outside += 1;
        let named = search_functions_named(&library_source(&file));
        assert!(
            named.is_empty(),
            "{} runs a search itself: {named:?}",
            file.display()
        );
    }
    assert!(outside > 100, "only {outside} files read");
}

#[test]
fn the_search_reader_tells_functions_from_types() {
    let text = "use crate::quantize::target_search::{search_target, Goal, TargetConfig};\nuse crate::quantize::scale_search::SEARCH_SAMPLES;\nlet r = crate::quantize::evaluate::measure_int8(&c);\n";
    assert_eq!(
        search_functions_named(text),
        [
            "crate::quantize::target_search::search_target",
            "crate::quantize::evaluate::measure_int8"
        ]
    );
}

/// The subcommands whose jobs live in `jobs/`, each a module or a folder named after it.
const JOBS: &[&str] = &[
    "build",
    "calibrate",
    "quantize",
    "init",
    "run",
    "validate",
    "compare",
    "layerwise",
    "inspect",
    "doctor",
    "precision_compare",
    "precision_table",
];

/// The files outside `jobs/` allowed a job-shaped function: the `report` job, kept beside the
/// renderers it is made of because `jobs/` holding it would close a cycle (see
/// `src/jobs/mod.rs`), and the INT8 measurements and searches the `quantize` job's requests run.
const JOB_SHAPED_ELSEWHERE: &[&str] = &[
    "report/job.rs",
    "quantize/evaluate.rs",
    "quantize/sensitivity_scan.rs",
    "quantize/target_search.rs",
];

/// Whether a function signature (from `pub fn` to its body) has a job's shape: a `…Config` taken
/// by reference in, a `Result` of a `…Report` out.
fn job_shaped(signature: &str) -> bool {
    let Some((args, ret)) = signature.split_once("->") else {
        return false;
    };
    let takes_config = args.split('&').skip(1).any(|after| {
        let ty: String = after
            .trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        ty.ends_with("Config")
    });
    takes_config && ret.contains("Result<") && ret.contains("Report")
}

/// The files under `src/` with a public job-shaped function, relative to `src/`.
fn job_files(src: &Path) -> Vec<String> {
    let mut files = vec![];
    rust_files(src, &mut files);
    let mut jobs = vec![];
    for file in files {
        let text = code_lines(&file);
        let has_job = text.match_indices("pub fn ").any(|(i, _)| {
            let rest = &text[i..];
            job_shaped(&rest[..rest.find('{').unwrap_or(rest.len())])
        });
        if has_job {
            jobs.push(
                file.strip_prefix(src)
                    .unwrap()
                    .to_string_lossy()
                    .to_string(),
            );
        }
    }
    jobs
}

#[test]
fn jobs_live_in_jobs_and_nowhere_else() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for job in JOBS {
        let dir = src.join("jobs");
        assert!(
            dir.join(format!("{job}.rs")).is_file() || dir.join(job).join("mod.rs").is_file(),
            "the {job} job has no home in src/jobs/"
        );
    }
    let found = job_files(&src);
    assert!(
        found.iter().filter(|f| f.starts_with("jobs/")).count() >= 8,
        "the job reader found too few jobs: {found:?}"
    );
    for file in &found {
        assert!(
            file.starts_with("jobs/") || JOB_SHAPED_ELSEWHERE.contains(&file.as_str()),
            "src/{file} defines a job outside src/jobs/"
        );
    }
}

#[test]
fn the_job_reader_sees_a_config_in_report_out_function() {
    assert!(job_shaped(
        "pub fn build(\n    config: &BuildConfig,\n    p: &dyn Progress,\n) -> Result<BuildReport> "
    ));
    assert!(!job_shaped(
        "pub fn f(x: &Settings) -> Result<BuildReport> "
    ));
    assert!(!job_shaped("pub fn f(x: &BuildConfig) -> BuildReport "));
}

/// `text` without its `#[cfg(test)]` items: each from that line to the first line after it that
/// closes an item at the left margin (`}`).
fn without_test_items(text: &str) -> String {
    let mut kept = vec![];
    let mut in_test = false;
    for line in text.lines() {
        if line.trim() == "#[cfg(test)]" {
            in_test = true;
        } else if in_test && line == "}" {
            in_test = false;
        } else if !in_test {
            kept.push(line);
        }
    }
    kept.join("\n")
}

/// The calls that make a backend; outside tests only `backend::open` makes them.
const BACKEND_CONSTRUCTORS: &[&str] = &[
    "TractBackend::load(",
    "OrtBackend::load(",
    "OrtCudaBackend::load(",
    "TrtBackend::open(",
];

#[test]
fn backend_open_is_the_only_opener() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let opener = src.join("backend/open.rs");
    let mut files = vec![];
    rust_files(&src, &mut files);
    let mut seen = 0;
    // A unit-test file (`tests.rs`) or item (`#[cfg(test)]`) opens the backend it tests.
    for file in files.into_iter().filter(|f| !f.ends_with("tests.rs")) {
        let text = without_test_items(&code_lines(&file));
        let made: Vec<&str> = BACKEND_CONSTRUCTORS
            .iter()
            .copied()
            .filter(|c| text.contains(c))
            .collect();
        if file == opener {
            seen = made.len();
        } else {
            assert!(
                made.is_empty(),
                "{} opens a backend itself ({made:?}): open it through backend::open",
                file.display()
            );
        }
    }
    assert_eq!(
        seen,
        BACKEND_CONSTRUCTORS.len(),
        "backend/open.rs opens every backend"
    );
}

#[test]
fn test_items_are_left_out_of_the_opener_check() {
    let text = "fn a() {}\n#[cfg(test)]\nfn t() {\n    TractBackend::load(m)\n}\nfn b() {}";
    assert_eq!(without_test_items(text), "fn a() {}\nfn b() {}");
}

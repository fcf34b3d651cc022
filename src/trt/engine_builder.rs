//! The TensorRT-RTX builder in trtkit's terms: ONNX bytes, a shape profile and builder
//! settings in; a serialized engine and what the network looked like out. Parser errors name
//! the ONNX node and op; TensorRT's own log goes to `tracing` (warnings at `-v`).

use super::engine_file::{BuilderSettings, EngineTensor};
use super::engine_io::dtype_name;
use super::loader::{locate_usable, TrtLibraries, BOUND};
use super::logged_error::{read_logged_error, LoggedError};
use super::profile::ShapeProfile;
use crate::onnx::pb::GraphProto;
use crate::progress::Progress;
use anyhow::{anyhow, bail, Context, Result};
use std::ops::ControlFlow;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use trtx::host_memory::HostMemory;
use trtx::interfaces::MonitorProgress;
use trtx::trtx_sys::Dims64;
use trtx::{Builder, LogHandler, Logger, OnnxParser, OptProfileSelector, Severity};

/// A serialized engine and the network it came from; its bytes stay in TensorRT's own buffer
/// (50 MB for a ResNet-50, not copied), which lives as long as the build's [`BuildLog`].
pub(crate) struct BuiltEngine<'log> {
    /// The engine file's bytes.
    pub bytes: HostMemory<'log>,
    /// Network inputs, then outputs.
    pub io: Vec<EngineTensor>,
    /// Layers of the parsed network.
    pub layers: usize,
    /// Seconds in the ONNX parser.
    pub(crate) parse_s: f64,
    /// Seconds in `buildSerializedNetwork`.
    pub(crate) build_s: f64,
}

/// Makes TensorRT-RTX callable: loads both libraries once per process (later calls with other
/// paths keep the first ones).
pub fn load(libs: &TrtLibraries) -> Result<()> {
    trtx::dynamically_load_tensorrt(Some(&libs.runtime)).map_err(|e| {
        anyhow!(
            "{}: cannot load {}: {e}",
            libs.runtime.display(),
            BOUND.flavour
        )
    })?;
    trtx::dynamically_load_tensorrt_onnxparser(Some(&libs.parser)).map_err(|e| {
        anyhow!(
            "{}: cannot load {}'s ONNX parser: {e}",
            libs.parser.display(),
            BOUND.flavour
        )
    })?;
    Ok(())
}

/// TensorRT's libraries found, checked and loaded on another thread (the runtime library alone
/// takes tens of milliseconds to map), while the model is read. Waited for before TensorRT is
/// called, and on drop: a process that exits (an error about the model) while another thread
/// is inside `dlopen` of TensorRT can crash in the libraries' static initialisers.
pub(crate) struct Loading(Option<std::thread::JoinHandle<Result<TrtLibraries>>>);

impl Loading {
    /// Starts finding (in `dir`, else where [`locate_usable`] looks) and loading the libraries
    /// on a new thread.
    pub(crate) fn start(dir: Option<&Path>) -> Self {
        let dir = dir.map(Path::to_path_buf);
        Loading(Some(std::thread::spawn(move || {
            let start = Instant::now();
            let libs = locate_usable(dir.as_deref())?;
            load(&libs)?;
            tracing::debug!(
                "TensorRT's libraries found and loaded in {:.3} s",
                start.elapsed().as_secs_f64()
            );
            Ok(libs)
        })))
    }

    /// Waits for the libraries: the ones loaded, or why they could not be.
    pub(crate) fn wait(mut self) -> Result<TrtLibraries> {
        self.join()
            .unwrap_or_else(|| unreachable!("waited for once"))
    }

    fn join(&mut self) -> Option<Result<TrtLibraries>> {
        let h = self.0.take()?;
        let waited = Instant::now();
        let libs = h.join().expect("loading TensorRT does not panic");
        tracing::debug!(
            "waited {:.3} s for TensorRT's libraries",
            waited.elapsed().as_secs_f64()
        );
        Some(libs)
    }
}

impl Drop for Loading {
    fn drop(&mut self) {
        let _ = self.join();
    }
}

/// Collects TensorRT's errors (for the error message) and forwards the rest to `tracing`.
#[derive(Clone, Default)]
pub(crate) struct LogCollector {
    errors: Arc<Mutex<Vec<String>>>,
}

impl LogHandler for LogCollector {
    fn log(&self, severity: Severity, message: &str) {
        match severity {
            Severity::InternalError | Severity::Error => {
                tracing::debug!("TensorRT: {message}");
                if let Ok(mut e) = self.errors.lock() {
                    e.push(message.trim().to_string());
                }
            }
            Severity::Warning => tracing::info!("TensorRT: {message}"),
            Severity::Info => tracing::debug!("TensorRT: {message}"),
            Severity::Verbose => tracing::trace!("TensorRT: {message}"),
        }
    }
}

/// The logger of one build and the errors it collected: held by the caller, since the engine's
/// bytes live as long as the logger TensorRT's builder was made with.
pub(crate) struct BuildLog {
    collector: LogCollector,
    logger: Logger,
}

impl BuildLog {
    /// A logger for one build (TensorRT must be loaded).
    pub fn new() -> Result<Self> {
        let collector = LogCollector::default();
        let logger = Logger::new(collector.clone()).map_err(|e| anyhow!("TensorRT logger: {e}"))?;
        Ok(Self { collector, logger })
    }
}

impl LogCollector {
    /// The errors collected so far, leaving none.
    pub(crate) fn take(&self) -> Vec<String> {
        self.errors
            .lock()
            .map(|mut e| std::mem::take(&mut *e))
            .unwrap_or_default()
    }
}

/// Adapts TensorRT's progress monitor to a [`Progress`], keeping the phase nesting: the
/// outermost phase's steps advance the bar, the innermost phase's name is its status.
struct Monitor {
    inner: Arc<dyn Progress>,
    stack: Mutex<Vec<String>>,
}

impl MonitorProgress for Monitor {
    fn phase_start(&self, phase_name: &str, _parent: Option<&str>, num_steps: i32) {
        let depth = self.stack.lock().map(|mut s| {
            s.push(phase_name.to_string());
            s.len() - 1
        });
        if depth.unwrap_or(0) == 0 {
            self.inner.start("building", Some(num_steps.max(0) as u64));
        }
        self.inner.status(phase_name.to_string());
    }
    fn step_complete(&self, phase_name: &str, _step: i32) -> ControlFlow<()> {
        let depth = self
            .stack
            .lock()
            .ok()
            .and_then(|s| s.iter().rposition(|p| p == phase_name))
            .unwrap_or(0);
        if depth == 0 {
            self.inner.advance(1);
        }
        self.inner.status(phase_name.to_string());
        ControlFlow::Continue(())
    }
    fn phase_finish(&self, phase_name: &str) {
        let depth = self.stack.lock().ok().and_then(|mut s| {
            let at = s.iter().rposition(|p| p == phase_name)?;
            s.truncate(at);
            Some(at)
        });
        if depth.unwrap_or(0) == 0 {
            self.inner.finish();
        }
    }
}

/// The node a parser error points at: TensorRT logs "While parsing node number N [Op -> ...]".
fn failing_node(errors: &[String]) -> Option<usize> {
    errors.iter().find_map(|e| {
        let at = e.find("node number ")? + "node number ".len();
        let digits: String = e[at..].chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    })
}

/// The parser's own explanation of the first failing node: the first `ERROR:` entry after
/// the first "While parsing node", its last line ("[6] reason"), or the function that refused
/// the node when the reason is a bare `false`.
fn parser_reason(desc: &str, errors: &[String]) -> String {
    let start = errors
        .iter()
        // reads words, not a kind: TensorRT's log is its parser's only account.
        .position(|e| e.contains("While parsing node"))
        .unwrap_or(0);
    let entry = errors[start.min(errors.len())..]
        .iter()
        // reads words, not a kind: as above.
        .find(|e| e.contains("ERROR:"));
    let Some(entry) = entry else {
        return desc.to_string();
    };
    let last = entry.lines().last().unwrap_or(entry).trim();
    let reason = last
        .trim_start_matches(|c: char| c == '[' || c.is_ascii_digit() || c == ']' || c == ' ')
        .to_string();
    let function = entry
        .split("In function ")
        .nth(1)
        .map(|f| f.split([':', '\n']).next().unwrap_or(f).trim().to_string());
    match function {
        Some(f) if reason.len() < 8 => format!("refused by the parser's {f} ({reason})"),
        _ => reason,
    }
}

/// One line describing why the parser refused the model.
pub(crate) fn parse_error_message(graph: &GraphProto, desc: &str, errors: &[String]) -> String {
    let reason = parser_reason(desc, errors);
    // reads words, not a kind: the parser's reason, read from TensorRT's log.
    let hint = if reason.contains("Plugin not found") {
        " (TensorRT has no importer for this op)"
    } else {
        ""
    };
    match failing_node(errors).and_then(|i| graph.node.get(i).map(|n| (i, n))) {
        Some((i, node)) => format!(
            "TensorRT-RTX's ONNX parser cannot import node {i} '{}' (op {}): {reason}{hint}",
            node.name, node.op_type
        ),
        None => format!("TensorRT-RTX's ONNX parser refused the model: {reason}"),
    }
}

/// The message when the builder failed with `e`: the last three errors TensorRT logged
/// (`errors`), each read apart where it is in TensorRT's form, with what trtkit knows of the
/// last one on a model like `graph`; `e` when it logged none.
fn build_failure(errors: &[String], e: &dyn std::fmt::Display, graph: &GraphProto) -> String {
    let last = &errors[errors.len().saturating_sub(3)..];
    let read: Vec<Option<LoggedError>> = last.iter().map(|e| read_logged_error(e)).collect();
    let clauses: Vec<String> = last
        .iter()
        .zip(&read)
        .map(|(text, read)| match read {
            Some(r) => r.clause(),
            None => text.replace('\n', " "),
        })
        .collect();
    let hint = read.iter().flatten().last().and_then(|r| r.hint(graph));
    let detail = match (clauses.is_empty(), hint) {
        (true, _) => e.to_string(),
        (false, Some(h)) => format!("{}; {h}", clauses.join("; ")),
        (false, None) => clauses.join("; "),
    };
    format!("TensorRT-RTX could not build the engine: {detail}")
}

/// Parses `onnx` (whose graph is `graph`, for naming failing nodes) and builds a serialized
/// engine with one optimization profile.
pub(crate) fn build_engine<'log>(
    log: &'log BuildLog,
    onnx: &[u8],
    graph: &GraphProto,
    profile: &ShapeProfile,
    settings: &BuilderSettings,
    progress: Arc<dyn Progress>,
) -> Result<BuiltEngine<'log>> {
    let (collector, logger) = (&log.collector, &log.logger);
    let mut builder = Builder::new(logger).map_err(|e| anyhow!("TensorRT builder: {e}"))?;
    let network = builder
        .create_network(0)
        .map_err(|e| anyhow!("TensorRT network: {e}"))?;
    let mut parser =
        OnnxParser::new(network, logger).map_err(|e| anyhow!("TensorRT ONNX parser: {e}"))?;
    let t_parse = Instant::now();
    if let Err(e) = parser.parse(onnx) {
        let errors = collector.take();
        bail!("{}", parse_error_message(graph, &e.to_string(), &errors));
    }
    let parse_s = t_parse.elapsed().as_secs_f64();

    let mut io = Vec::new();
    let mut trt_profile = builder
        .creata_optimization_profile()
        .map_err(|e| anyhow!("TensorRT optimization profile: {e}"))?;
    {
        let net = parser.network();
        for (kind, count) in [("input", net.nb_inputs()), ("output", net.nb_outputs())] {
            for i in 0..count {
                let t = if kind == "input" {
                    net.input(i)
                } else {
                    net.output(i)
                }
                .map_err(|e| anyhow!("network {kind} {i}: {e}"))?;
                io.push(EngineTensor {
                    name: t
                        .name(net)
                        .map_err(|e| anyhow!("network {kind} {i}: {e}"))?,
                    io: kind.into(),
                    dtype: dtype_name(t.data_type(net)),
                    dims: t.dimensions(net).unwrap_or_default(),
                });
            }
        }
    }
    for input in io.iter().filter(|t| t.io == "input") {
        let p = profile
            .inputs
            .iter()
            .find(|p| p.name == input.name)
            .with_context(|| {
                format!(
                    "the parsed network has an input '{}' the profile does not cover",
                    input.name
                )
            })?;
        for (selector, dims, which) in [
            (OptProfileSelector::kMIN, &p.min, "min"),
            (OptProfileSelector::kOPT, &p.opt, "opt"),
            (OptProfileSelector::kMAX, &p.max, "max"),
        ] {
            if dims.len() != input.dims.len() {
                bail!(
                    "profile {which} of input '{}' has rank {}, the network's input has rank {}",
                    input.name,
                    dims.len(),
                    input.dims.len()
                );
            }
            trt_profile
                .set_dimensions(&input.name, selector, &Dims64::from_slice(dims))
                .map_err(|e| {
                    anyhow!(
                        "TensorRT refused the {which} shape {dims:?} of input '{}': {e}",
                        input.name
                    )
                })?;
        }
    }
    let mut config = builder
        .create_config()
        .map_err(|e| anyhow!("TensorRT builder config: {e}"))?;
    config
        .add_optimization_profile(&mut trt_profile)
        .map_err(|e| anyhow!("TensorRT refused the optimization profile: {e}"))?;
    if let Some(mib) = settings.workspace_mib {
        config.set_memory_pool_limit(trtx::MemoryPoolType::kWORKSPACE, (mib as usize) << 20);
    }
    if let Some(level) = settings.optimization_level {
        config.set_builder_optimization_level(level);
    }
    config
        .set_progress_monitor(Box::new(Monitor {
            inner: progress,
            stack: Mutex::new(Vec::new()),
        }))
        .map_err(|e| anyhow!("TensorRT progress monitor: {e}"))?;
    let layers = parser.network().nb_layers().max(0) as usize;
    let t_build = Instant::now();
    let network = parser.network_mut();
    let built = builder.build_serialized_network(network, &mut config);
    let build_s = t_build.elapsed().as_secs_f64();
    let bytes = match built {
        Ok(mem) => mem,
        Err(e) => bail!("{}", build_failure(&collector.take(), &e, graph)),
    };
    Ok(BuiltEngine {
        bytes,
        io,
        layers,
        parse_s,
        build_s,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::pb::NodeProto;

    #[test]
    fn parser_errors_name_the_node_and_op() {
        let graph = GraphProto {
            node: vec![
                NodeProto {
                    name: "first_relu".into(),
                    op_type: "Relu".into(),
                    ..Default::default()
                },
                NodeProto {
                    name: "the_fancy_node".into(),
                    op_type: "FancyOp".into(),
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        // What TensorRT-RTX 1.7 logs for an op it has no importer for.
        let errors = vec![
            "ModelImporter.cpp:140: While parsing node number 1 [FancyOp -> \"y\"]:".to_string(),
            "ModelImporter.cpp:142: --- Begin node ---\nNode name: the_fancy_node".to_string(),
            "ModelImporter.cpp:143: --- End node ---".to_string(),
            "ModelImporter.cpp:151: ERROR: onnxOpCheckers.cpp:998 In function checkFallbackPluginImporter:\n[6] creator && \"Plugin not found, are the plugin name, version, and namespace correct?\"".to_string(),
        ];
        let msg = parse_error_message(&graph, "creator && ...", &errors);
        assert!(
            msg.contains("node 1 'the_fancy_node' (op FancyOp)"),
            "{msg}"
        );
        assert!(msg.contains("Plugin not found"), "{msg}");
        assert!(msg.contains("no importer"), "{msg}");
        assert!(!msg.contains('\n'));
        let msg = parse_error_message(
            &graph,
            "false",
            &[
                "ModelImporter.cpp:140: While parsing node number 0 [Relu -> \"h\"]:".into(),
                "ModelImporter.cpp:151: ERROR: onnxOpCheckers.cpp:1213 In function checkRelu:\n[8] false".into(),
                "ModelImporter.cpp:140: While parsing node number 1 [FancyOp -> \"y\"]:".into(),
                "ModelImporter.cpp:151: ERROR: x.cpp:1 In function other:\n[8] something else".into(),
            ],
        );
        assert!(msg.contains("node 0 'first_relu' (op Relu)"), "{msg}");
        assert!(msg.contains("checkRelu"), "{msg}");
        let msg = parse_error_message(&graph, "bad protobuf", &[]);
        assert!(msg.ends_with("bad protobuf"), "{msg}");
    }
}

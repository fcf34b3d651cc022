//! Fuzzing on stable Rust, as a test: every target of `trtkit::fuzz_targets` runs on mutations of
//! its seed inputs for a time box, `TRTKIT_FUZZ_SECONDS` each (2 by default; `.ci/run` gives
//! more). The seeds are made here (a model, archives, images, a cache, a journal) and joined by
//! every file under `tests/fuzz_corpus/<target>/`, the inputs that once crashed a target. A panic
//! fails the test and keeps the input under `target/fuzz-crashes/<target>/`, to be copied into the
//! corpus with its fix. Executions per second are printed for each target.
//!
//! The decode budget is set low (`TRTKIT_DECODE_BUDGET`, 256 MiB) so that an input claiming
//! more is refused by the code under test, not by the machine.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use trtkit::fuzz_targets::{Target, TARGETS};
use trtkit::tensor::{HostTensor, TensorData};

/// A small, fast, seeded generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Values that sit on the edges parsers get wrong: zero, all ones, sign bits, sizes that wrap.
const EDGES: &[u64] = &[
    0,
    1,
    0x7f,
    0x80,
    0xff,
    0x7fff,
    0xffff,
    0x7fff_ffff,
    0xffff_ffff,
    1 << 32,
    1 << 50,
    u64::MAX,
    u64::MAX - 7,
];

/// Op types a model mutation may swap in: the ones the rewrites and the checks treat apart.
const OPS: &[&str] = &[
    "Conv",
    "Gemm",
    "MatMul",
    "BatchNormalization",
    "Resize",
    "Cast",
    "Constant",
    "Reshape",
    "Concat",
    "If",
    "Loop",
    "Softmax",
    "Add",
    "Relu",
    "Flatten",
    "QuantizeLinear",
    "DequantizeLinear",
    "Range",
    "ConstantOfShape",
    "Gather",
    "Slice",
];

/// A mutation of an ONNX model at the level of its graph (names, dims, types, ops, attributes),
/// which byte flips rarely reach: the bytes still decode, the graph is what is wrong.
fn mutate_model(input: &[u8], rng: &mut Rng) -> Option<Vec<u8>> {
    use prost::Message;
    use trtkit::onnx::pb::ModelProto;
    let mut model = ModelProto::decode(input).ok()?;
    let g = model.graph.as_mut()?;
    let names: Vec<String> = g
        .node
        .iter()
        .flat_map(|n| n.input.iter().chain(&n.output).cloned())
        .chain(g.initializer.iter().map(|t| t.name.clone()))
        .chain(["".to_string(), "nowhere".to_string()])
        .collect();
    let edge = |rng: &mut Rng| EDGES[rng.below(EDGES.len())] as i64;
    for _ in 0..1 + rng.below(3) {
        let nodes = g.node.len();
        let inits = g.initializer.len();
        match rng.below(9) {
            0 if nodes > 0 => {
                let n = &mut g.node[rng.below(nodes)];
                let slot = rng.below(n.input.len() + 1);
                let name = names[rng.below(names.len())].clone();
                match slot < n.input.len() {
                    true => n.input[slot] = name,
                    false => n.input.push(name),
                }
            }
            1 if nodes > 0 => {
                let n = &mut g.node[rng.below(nodes)];
                n.op_type = OPS[rng.below(OPS.len())].to_string();
            }
            2 if nodes > 0 => {
                let n = &mut g.node[rng.below(nodes)];
                let k = rng.below(n.attribute.len().max(1));
                if let Some(a) = n.attribute.get_mut(k) {
                    match rng.below(3) {
                        0 => a.i = edge(rng),
                        1 => a.ints = (0..rng.below(6)).map(|_| edge(rng)).collect(),
                        _ => a.r#type = rng.below(16) as i32,
                    }
                }
            }
            3 if inits > 0 => {
                let t = &mut g.initializer[rng.below(inits)];
                let k = rng.below(t.dims.len() + 1);
                match k < t.dims.len() {
                    true => t.dims[k] = edge(rng),
                    false => t.dims.push(edge(rng)),
                }
            }
            4 if inits > 0 => {
                let t = &mut g.initializer[rng.below(inits)];
                t.data_type = rng.below(26) as i32;
            }
            5 if inits > 0 => {
                let t = &mut g.initializer[rng.below(inits)];
                let keep = rng.below(t.raw_data.len() + 1);
                t.raw_data.truncate(keep);
            }
            6 if nodes > 1 => {
                let (a, b) = (rng.below(nodes), rng.below(nodes));
                g.node.swap(a, b);
            }
            7 if !g.input.is_empty() => {
                let k = rng.below(g.input.len());
                let v = &mut g.input[k];
                if let Some(trtkit::onnx::pb::type_proto::Value::TensorType(t)) =
                    v.r#type.as_mut().and_then(|t| t.value.as_mut())
                {
                    t.elem_type = rng.below(26) as i32;
                    let dims = t.shape.as_mut().map(|s| &mut s.dim);
                    let k = rng.below(dims.as_ref().map_or(1, |d| d.len().max(1)));
                    if let Some(dim) = dims.and_then(|d| d.get_mut(k)) {
                        use trtkit::onnx::pb::tensor_shape_proto::dimension::Value;
                        dim.value = Some(Value::DimValue(edge(rng)));
                    }
                }
            }
            _ if nodes > 0 => {
                let at = rng.below(nodes);
                match rng.below(2) {
                    0 => {
                        g.node.remove(at);
                    }
                    _ => {
                        let copy = g.node[at].clone();
                        g.node.insert(rng.below(nodes), copy);
                    }
                }
            }
            _ => {}
        }
    }
    Some(model.encode_to_vec())
}

/// One mutation of `input`, drawing on `seeds` for splices.
fn mutate(input: &[u8], seeds: &[Vec<u8>], rng: &mut Rng) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        let len = out.len();
        match rng.below(7) {
            0 if len > 0 => {
                let i = rng.below(len);
                out[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                out[i] = rng.next() as u8;
            }
            2 if len > 0 => {
                // An edge value written over 1, 2, 4 or 8 bytes, little or big endian.
                let width = 1 << rng.below(4);
                let at = rng.below(len);
                let value = EDGES[rng.below(EDGES.len())];
                let bytes = match rng.below(2) {
                    0 => value.to_le_bytes(),
                    _ => value.to_be_bytes(),
                };
                for (k, b) in bytes.iter().take(width).enumerate() {
                    if let Some(slot) = out.get_mut(at + k) {
                        *slot = *b;
                    }
                }
            }
            3 if len > 0 => out.truncate(rng.below(len)),
            4 if len > 1 => {
                let at = rng.below(len);
                let n = rng.below((len - at).min(64));
                out.drain(at..at + n);
            }
            5 => {
                // Bytes copied from elsewhere in the input (repeated chunks, length fields).
                let at = rng.below(len + 1);
                let from = rng.below(len.max(1));
                let n = rng.below(64).min(len.saturating_sub(from));
                let chunk: Vec<u8> = out[from..from + n].to_vec();
                out.splice(at..at, chunk);
            }
            _ => {
                // A splice with another seed.
                let other = &seeds[rng.below(seeds.len())];
                let cut = rng.below(out.len() + 1);
                let from = rng.below(other.len() + 1);
                out.truncate(cut);
                out.extend_from_slice(&other[from..]);
            }
        }
    }
    out
}

fn png(w: u32, h: u32, color: png::ColorType, channels: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut enc = png::Encoder::new(&mut out, w, h);
    enc.set_color(color);
    enc.set_depth(png::BitDepth::Eight);
    let data: Vec<u8> = (0..w as usize * h as usize * channels)
        .map(|i| (i * 37) as u8)
        .collect();
    enc.write_header().unwrap().write_image_data(&data).unwrap();
    out
}

fn jpeg(w: u16, h: u16, progressive: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let mut enc = jpeg_encoder::Encoder::new(&mut out, 80);
    enc.set_progressive(progressive);
    let data: Vec<u8> = (0..w as usize * h as usize * 3)
        .map(|i| (i * 13) as u8)
        .collect();
    enc.encode(&data, w, h, jpeg_encoder::ColorType::Rgb)
        .unwrap();
    out
}

fn tensors() -> Vec<HostTensor> {
    let x = TensorData::F32(vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
    vec![
        HostTensor::new("x", vec![2, 3], x).unwrap(),
        HostTensor::new("ids", vec![3], TensorData::I64(vec![7, 8, 9])).unwrap(),
    ]
}

/// The seed inputs made in code for `target`.
fn made_seeds(target: &str) -> Vec<Vec<u8>> {
    use prost::Message;
    match target {
        "onnx_transformer_fusion" => {
            use trtkit::onnx::test_models::{encoder, EncoderStyle};
            let style = |mask, packed_qkv, pre_norm| EncoderStyle {
                mask,
                packed_qkv,
                pre_norm,
                ..Default::default()
            };
            [style(true, false, false), style(false, true, true)]
                .map(|s| encoder(s).encode_to_vec())
                .to_vec()
        }
        "onnx" | "onnx_fp16" => {
            use trtkit::onnx::test_models as m;
            [
                m::classifier(None),
                m::paddle_style_pyramid(),
                m::token_classifier(),
                m::dynamic_quantized_matmul(),
                m::recogniser(4, 5, None),
                m::segmenter(3, 8, Some(1)),
                m::fp16_overflow(),
            ]
            .iter()
            .map(|model| model.encode_to_vec())
            .collect()
        }
        "npz" => vec![trtkit::data::npz::encode(&tensors()).unwrap()],
        "npy" => tensors().iter().map(trtkit::data::npy::encode).collect(),
        "image" => vec![
            png(5, 3, png::ColorType::Rgb, 3),
            png(4, 4, png::ColorType::Rgba, 4),
            png(3, 2, png::ColorType::Grayscale, 1),
            jpeg(9, 7, false),
            jpeg(16, 8, true),
        ],
        "calibration_cache" => {
            vec![b"TRT-100300-EntropyCalibration2\ninput: 3c010a0c\nconv_out: 3d8f5c29\n".to_vec()]
        }
        // A real journal is kept in the corpus folder (seed-report.jsonl); this is a torn one.
        "bench_journal" => vec![b"{\"id\":\"a\",\"key\":{\"model_sha256\":\"d7\",\n".to_vec()],
        other => panic!("no seeds for target {other}"),
    }
}

/// The seeds made in code and those kept in `tests/fuzz_corpus/<target>/`.
fn seeds(target: &str) -> Vec<Vec<u8>> {
    let mut all = made_seeds(target);
    let kept = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz_corpus")
        .join(target);
    if let Ok(entries) = std::fs::read_dir(&kept) {
        let mut files: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        files.sort();
        all.extend(files.iter().filter_map(|f| std::fs::read(f).ok()));
    }
    all
}

/// Keeps a crashing input and says where.
fn keep_crash(target: &str, input: &[u8]) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/fuzz-crashes")
        .join(target);
    std::fs::create_dir_all(&dir).unwrap();
    let hash = input.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    });
    let path = dir.join(format!("crash-{hash:016x}"));
    std::fs::write(&path, input).unwrap();
    path
}

/// Runs `target` on its seeds, then on mutations of them until `budget` has passed; returns
/// the executions, or the crashing input's path.
fn fuzz(target: &Target, seeds: Vec<Vec<u8>>, budget: Duration, seed: u64) -> Result<u64, String> {
    let mut rng = Rng(seed | 1);
    let started = Instant::now();
    let mut executions = 0u64;
    let mut queue = seeds.clone();
    while executions < seeds.len() as u64 || started.elapsed() < budget {
        let input = match executions < seeds.len() as u64 {
            true => seeds[executions as usize].clone(),
            false => {
                let parent = &queue[rng.below(queue.len())];
                let structured = target.name.starts_with("onnx") && rng.below(2) == 0;
                match structured.then(|| mutate_model(parent, &mut rng)).flatten() {
                    Some(model) => model,
                    None => mutate(parent, &seeds, &mut rng),
                }
            }
        };
        let run = target.run;
        if catch_unwind(AssertUnwindSafe(|| run(&input))).is_err() {
            let kept = keep_crash(target.name, &input);
            return Err(format!(
                "target '{}' panicked on {} ({} bytes) after {executions} executions",
                target.name,
                kept.display(),
                input.len()
            ));
        }
        // Mutations of mutations reach deeper; the queue stays small.
        if executions.is_multiple_of(16) && queue.len() < 256 {
            queue.push(input);
        }
        executions += 1;
    }
    Ok(executions)
}

#[test]
fn no_target_panics_on_mutated_inputs() {
    std::env::set_var("TRTKIT_DECODE_BUDGET", "256M");
    let seconds: f64 = std::env::var("TRTKIT_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2.0);
    let seed: u64 = std::env::var("TRTKIT_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed);
    let mut failures = vec![];
    for target in TARGETS {
        let started = Instant::now();
        let budget = Duration::from_secs_f64(seconds);
        match fuzz(target, seeds(target.name), budget, seed) {
            Ok(n) => println!(
                "fuzz {:<18} {n:>9} executions, {:>8.0}/s",
                target.name,
                n as f64 / started.elapsed().as_secs_f64()
            ),
            Err(why) => failures.push(why),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_mutator_changes_inputs_and_never_grows_them_without_bound() {
    let seeds = vec![b"0123456789abcdef".to_vec(), b"xyz".to_vec()];
    let mut rng = Rng(7);
    let mut changed = 0;
    for _ in 0..1000 {
        let m = mutate(&seeds[0], &seeds, &mut rng);
        assert!(m.len() <= seeds[0].len() + 4 * 64 + seeds[1].len());
        changed += usize::from(m != seeds[0]);
    }
    assert!(
        changed > 900,
        "{changed} of 1000 mutations changed the input"
    );
}

#[test]
fn a_panicking_target_is_caught_and_its_input_kept() {
    let fragile = Target {
        name: "selftest",
        run: |b: &[u8]| assert!(!b.contains(&0xff), "planted bug"),
    };
    let seeds = vec![b"0123456789".to_vec()];
    let why = fuzz(&fragile, seeds, Duration::from_secs(20), 1).unwrap_err();
    assert!(why.starts_with("target 'selftest' panicked on "), "{why}");
    let kept = why
        .split(" on ")
        .nth(1)
        .unwrap()
        .split(" (")
        .next()
        .unwrap();
    assert!(std::fs::read(kept).unwrap().contains(&0xff), "{kept}");
    std::fs::remove_file(kept).unwrap();
}

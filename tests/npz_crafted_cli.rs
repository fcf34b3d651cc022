//! Crafted `.npz`/`.npy` files are refused with one line naming the file and the entry, exit 1:
//! a zip64 entry that claims 2^50 bytes, a deflate bomb (honest or lying about its size), an
//! `.npy` whose shape's byte count overflows. Each file is made here, small, and each refusal
//! comes back fast without the memory the file claims.

mod support;

use flate2::{Compress, Compression, FlushCompress};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};
use support::{assert_clean_error, save};
use trtkit::onnx::graph_builder::GraphBuilder;
use trtkit::onnx::pb::tensor_proto::DataType;
use trtkit::tensor::Dim;

/// One zip entry as the central directory describes it.
struct Entry<'a> {
    name: &'a str,
    /// 0: stored, 8: deflated.
    method: u16,
    /// The uncompressed size the headers claim.
    claimed: u64,
    /// The bytes that follow the local header.
    data: &'a [u8],
}

fn u16le(out: &mut Vec<u8>, v: u16) {
    out.extend(v.to_le_bytes());
}

fn u32le(out: &mut Vec<u8>, v: u32) {
    out.extend(v.to_le_bytes());
}

/// The zip64 extra field holding both sizes (both 32-bit fields then read 0xFFFFFFFF).
fn zip64_extra(e: &Entry) -> Vec<u8> {
    let mut x = vec![];
    u16le(&mut x, 1);
    u16le(&mut x, 16);
    x.extend(e.claimed.to_le_bytes());
    x.extend((e.data.len() as u64).to_le_bytes());
    x
}

/// The fields the local and central headers share, from "version needed" to the extra length.
fn common_fields(out: &mut Vec<u8>, e: &Entry, extra: &[u8]) {
    u16le(out, 45); // version needed: zip64
    u16le(out, 0); // flags
    u16le(out, e.method);
    u32le(out, 0); // time, date
    u32le(out, 0); // crc32 (never reached: every case is refused before the end)
    u32le(out, u32::MAX); // compressed size: in the zip64 extra
    u32le(out, u32::MAX); // uncompressed size: in the zip64 extra
    u16le(out, e.name.len() as u16);
    u16le(out, extra.len() as u16);
}

/// A one-entry zip archive, sizes in zip64 extra fields, written to `path`.
fn write_zip(path: &Path, e: &Entry) {
    let extra = zip64_extra(e);
    let mut out = vec![];
    u32le(&mut out, 0x0403_4b50);
    common_fields(&mut out, e, &extra);
    out.extend(e.name.as_bytes());
    out.extend(&extra);
    out.extend(e.data);
    let cd_at = out.len() as u32;
    u32le(&mut out, 0x0201_4b50);
    u16le(&mut out, 45); // made by
    common_fields(&mut out, e, &extra);
    u16le(&mut out, 0); // comment length
    u16le(&mut out, 0); // disk
    u16le(&mut out, 0); // internal attributes
    u32le(&mut out, 0); // external attributes
    u32le(&mut out, 0); // local header offset
    out.extend(e.name.as_bytes());
    out.extend(&extra);
    let cd_len = out.len() as u32 - cd_at;
    u32le(&mut out, 0x0605_4b50);
    u32le(&mut out, 0); // disks
    u16le(&mut out, 1);
    u16le(&mut out, 1);
    u32le(&mut out, cd_len);
    u32le(&mut out, cd_at);
    u16le(&mut out, 0);
    std::fs::write(path, out).unwrap();
}

/// A raw deflate stream of `gib` GiB of zeros, made by repeating one fully flushed block of
/// 1 MiB (a full flush resets the window, so the copies chain into one valid stream) and
/// ending with an empty final block: about 1 KiB of stream per MiB of output.
fn zeros_deflate(gib: u64) -> Vec<u8> {
    let mut c = Compress::new(Compression::best(), false);
    let mut block = Vec::with_capacity(64 << 10);
    c.compress_vec(&vec![0u8; 1 << 20], &mut block, FlushCompress::Full)
        .unwrap();
    let mut stream = Vec::with_capacity(block.len() * (gib as usize) * 1024 + 2);
    for _ in 0..gib * 1024 {
        stream.write_all(&block).unwrap();
    }
    stream.extend([0x03, 0x00]); // final, fixed-Huffman block holding only end-of-block
    stream
}

/// `x` [N, 4] → Relu → `y`.
fn relu_model(dir: &Path) -> PathBuf {
    let dims = [Dim::Symbol("N".into()), Dim::Fixed(4)];
    let mut g = GraphBuilder::new("relu");
    g.input("x", DataType::Float, &dims)
        .output("y", DataType::Float, &dims)
        .node("Relu", &["x"], &["y"], vec![]);
    save(dir, "relu.onnx", g.build())
}

/// `compare m m --inputs FILE`, its output and how long it took; `budget` sets the decoder
/// budget in the child's environment.
fn compare_inputs(dir: &Path, file: &Path, budget: Option<&str>) -> (Output, Duration) {
    let model = relu_model(dir);
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_trtkit"));
    cmd.args(["compare"])
        .arg(&model)
        .arg(&model)
        .args(["--backend", "tract", "--inputs"])
        .arg(file)
        .env_remove("TRTKIT_DECODE_BUDGET");
    if let Some(b) = budget {
        cmd.env("TRTKIT_DECODE_BUDGET", b);
    }
    let t = Instant::now();
    let out = cmd.output().unwrap();
    (out, t.elapsed())
}

#[test]
fn a_zip64_entry_claiming_a_petabyte_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.npz");
    let data = [0u8; 64];
    let e = Entry {
        name: "x.npy",
        method: 0,
        claimed: 1 << 50,
        data: &data,
    };
    write_zip(&path, &e);
    let (out, took) = compare_inputs(dir.path(), &path, None);
    assert_clean_error(
        &out,
        1,
        &["huge.npz", "entry 'x.npy'", "1125899906842624 bytes"],
    );
    assert!(took < Duration::from_secs(20), "{took:?}");
}

#[test]
fn a_deflate_bomb_that_declares_its_size_is_refused_by_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bomb.npz");
    let stream = zeros_deflate(12);
    assert!(stream.len() < 16 << 20, "{} bytes", stream.len());
    let e = Entry {
        name: "x.npy",
        method: 8,
        claimed: 12 << 30,
        data: &stream,
    };
    write_zip(&path, &e);
    let (out, took) = compare_inputs(dir.path(), &path, Some("1G"));
    assert_clean_error(
        &out,
        1,
        &[
            "bomb.npz",
            "entry 'x.npy' inflates to 12.0 GiB",
            "decoder budget of 1.0 GiB",
            "TRTKIT_DECODE_BUDGET",
        ],
    );
    assert!(took < Duration::from_secs(20), "{took:?}");
}

#[test]
fn a_deflate_bomb_that_lies_about_its_size_stops_at_the_declared_size() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("liar.npz");
    let stream = zeros_deflate(12);
    let e = Entry {
        name: "x.npy",
        method: 8,
        claimed: 4096,
        data: &stream,
    };
    write_zip(&path, &e);
    // No budget set: the default (from available memory) would let 4 KiB through; the bound
    // on the inflate is what stops the 12 GiB.
    let (out, took) = compare_inputs(dir.path(), &path, None);
    assert_clean_error(
        &out,
        1,
        &["liar.npz", "entry 'x.npy'", "past the 4096 bytes"],
    );
    assert!(took < Duration::from_secs(20), "{took:?}");
}

#[test]
fn a_budget_that_is_not_a_size_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("small.npz");
    let data = [0u8; 64];
    let e = Entry {
        name: "x.npy",
        method: 8,
        claimed: 64,
        data: &data,
    };
    write_zip(&path, &e);
    let (out, _) = compare_inputs(dir.path(), &path, Some("lots"));
    assert_clean_error(&out, 1, &["TRTKIT_DECODE_BUDGET='lots'", "not a size"]);
}

#[test]
fn an_npy_whose_shape_overflows_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.npy");
    let mut h =
        "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }".to_string();
    while !(10 + h.len() + 1).is_multiple_of(64) {
        h.push(' ');
    }
    h.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend((h.len() as u16).to_le_bytes());
    bytes.extend(h.as_bytes());
    std::fs::write(&path, &bytes).unwrap();
    let (out, _) = compare_inputs(dir.path(), &path, None);
    assert_clean_error(&out, 1, &["x.npy", "too large"]);
}

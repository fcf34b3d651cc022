use super::*;
use crate::backend::RunOutput;
use crate::jobs::validate::scoring::{ClassScorer, Scored};
use crate::progress::NoProgress;
use crate::tensor::{Dim, TensorData};
use std::collections::BTreeSet;
use std::path::PathBuf;

/// A host backend that records where each input batch lies and how many rows it has, and
/// scores class `row % 4` highest.
struct Recorder {
    io: (Vec<IoSpec>, Vec<IoSpec>),
    addresses: Vec<usize>,
    rows: Vec<usize>,
    short: bool,
    /// What each run reports as its time in the model.
    elapsed: Duration,
}

impl Recorder {
    fn new(elem: ElemType, short: bool) -> Recorder {
        let input = IoSpec {
            name: "x".into(),
            elem_type: elem,
            dims: vec![
                Dim::Symbol("n".into()),
                Dim::Fixed(3),
                Dim::Fixed(4),
                Dim::Fixed(4),
            ],
        };
        let output = IoSpec {
            name: "y".into(),
            elem_type: ElemType::F32,
            dims: vec![Dim::Symbol("n".into()), Dim::Fixed(4)],
        };
        Recorder {
            io: (vec![input], vec![output]),
            addresses: vec![],
            rows: vec![],
            short,
            elapsed: Duration::from_micros(10),
        }
    }
}

impl Backend for Recorder {
    fn name(&self) -> String {
        "recorder".into()
    }
    fn inputs(&self) -> &[IoSpec] {
        &self.io.0
    }
    fn outputs(&self) -> &[IoSpec] {
        &self.io.1
    }
    fn run(&mut self, inputs: &[HostTensor]) -> Result<RunOutput> {
        let address = match &inputs[0].data {
            TensorData::F32(v) => v.as_ptr() as usize,
            TensorData::F16(v) => v.as_ptr() as usize,
            _ => 0,
        };
        let n = inputs[0].shape[0];
        self.addresses.push(address);
        self.rows.push(n);
        let scores = (0..n)
            .flat_map(|r| (0..4).map(move |c| if c == r % 4 { 1.0 } else { 0.0 }))
            .collect();
        Ok(RunOutput {
            outputs: vec![HostTensor::new("y", vec![n, 4], TensorData::F32(scores))?],
            elapsed: self.elapsed,
        })
    }
    fn runs_short_batch(&self, _n: usize) -> bool {
        self.short
    }
}

fn pngs(dir: &Path, count: usize) -> Vec<Sample> {
    (0..count)
        .map(|i| {
            let path = dir.join(format!("{i:04}.png"));
            let img = vec![(i % 200) as u8; 5 * 5 * 3];
            let file = std::fs::File::create(&path).unwrap();
            let mut enc = png::Encoder::new(std::io::BufWriter::new(file), 5, 5);
            enc.set_color(png::ColorType::Rgb);
            enc.set_depth(png::BitDepth::Eight);
            enc.write_header().unwrap().write_image_data(&img).unwrap();
            // Labels follow the row within a batch of 4: every image is a top-1 hit.
            Sample { path, label: i % 4 }
        })
        .collect()
}

fn feeding(samples: Vec<Sample>, batch: usize, progress: &dyn Progress) -> Feeding<'_> {
    Feeding {
        model: Path::new("m.onnx"),
        samples,
        pre: Preprocess {
            resize: Some(4),
            crop: (4, 4),
            ..Preprocess::imagenet()
        },
        batch,
        prefetch: 1,
        warmup: 1,
        progress,
        started: Instant::now(),
        retune: None,
    }
}

fn input(elem: ElemType) -> ImageInput {
    ImageInput {
        spec: Recorder::new(elem, true).io.0[0].clone(),
        per_image: vec![3, 4, 4],
    }
}

/// The backend reads every batch where the loader wrote it: over 25 batches, no more
/// addresses than the ring has buffers, so no batch was copied or allocated on the way.
#[test]
fn host_batches_reach_the_backend_in_the_ring_buffers() {
    let d = tempfile::tempdir().unwrap();
    for elem in [ElemType::F32, ElemType::F16] {
        let mut backend = Recorder::new(elem, true);
        let mut scorer = ClassScorer::new(4, false);
        let m = run_host(
            &mut backend,
            &input(elem),
            feeding(pngs(d.path(), 100), 4, &NoProgress),
            &mut scorer,
        )
        .unwrap();
        assert_eq!(m.batches, 25);
        let distinct: BTreeSet<usize> = backend.addresses.iter().copied().collect();
        assert!(
            distinct.len() <= ring_len(4, 1, 100),
            "{} buffers for a ring of {}",
            distinct.len(),
            ring_len(4, 1, 100)
        );
        let Ok(Scored::Classes(acc, _)) = Box::new(scorer).finish() else {
            panic!("class scores expected")
        };
        assert_eq!((acc.total, acc.top1_hits), (100, 100));
        assert_eq!(m.lat_all.len(), 24, "one warm-up batch left out");
        assert_eq!(m.steady.0, 96);
    }
}

/// A short last batch runs as it is where the backend allows, else at the full batch with the
/// padding rows' outputs dropped; both score only the real images.
#[test]
fn a_short_last_batch_is_run_short_or_full_and_scored_short() {
    let d = tempfile::tempdir().unwrap();
    for (short, last) in [(true, 2), (false, 4)] {
        let mut backend = Recorder::new(ElemType::F32, short);
        let mut scorer = ClassScorer::new(4, true);
        run_host(
            &mut backend,
            &input(ElemType::F32),
            feeding(pngs(d.path(), 10), 4, &NoProgress),
            &mut scorer,
        )
        .unwrap();
        assert_eq!(backend.rows, [4, 4, last]);
        let Ok(Scored::Classes(acc, kept)) = Box::new(scorer).finish() else {
            panic!("class scores expected")
        };
        assert_eq!(acc.total, 10);
        assert_eq!(kept.len(), 10);
    }
}

#[test]
fn skipped_images_are_listed_and_the_rest_scored() {
    let d = tempfile::tempdir().unwrap();
    let mut samples = pngs(d.path(), 8);
    samples[5].path = PathBuf::from("/nonexistent/5.png");
    let mut backend = Recorder::new(ElemType::F32, true);
    let mut scorer = ClassScorer::new(4, false);
    let m = run_host(
        &mut backend,
        &input(ElemType::F32),
        feeding(samples, 4, &NoProgress),
        &mut scorer,
    )
    .unwrap();
    assert_eq!(m.failures.len(), 1);
    assert!(m.failures[0].path.ends_with("5.png"));
    assert_eq!(backend.rows, [4, 3]);
    assert!(m.split.model_s > 0.0 && m.loader.images == 8);
}

/// A host run on the CPU measures batches 1 to 3 and then chooses the model's threads: a model
/// that reports no time in it is loader-bound and is opened again on one thread for the rest;
/// one that takes a second a batch keeps its four.
#[test]
fn a_retuned_host_run_reopens_a_loader_bound_model_on_fewer_threads() {
    use crate::backend::cpu_split::PILOT_BATCHES;
    let d = tempfile::tempdir().unwrap();
    let samples = pngs(d.path(), 100);
    for (elapsed, reopened) in [(Duration::ZERO, vec![1]), (Duration::from_secs(1), vec![])] {
        let mut backend = Recorder::new(ElemType::F32, true);
        backend.elapsed = elapsed;
        let opened = std::cell::RefCell::new(vec![]);
        let reopen = |threads, _spinning| {
            opened.borrow_mut().push(threads);
            Ok(Box::new(Recorder::new(ElemType::F32, true)) as Box<dyn Backend>)
        };
        let mut feed = feeding(samples.clone(), 4, &NoProgress);
        feed.retune = Some(Retune {
            threads: 4,
            reopen: &reopen,
        });
        let mut scorer = ClassScorer::new(4, false);
        let m = run_host(&mut backend, &input(ElemType::F32), feed, &mut scorer).unwrap();
        assert_eq!(m.batches, 25);
        assert_eq!(*opened.borrow(), reopened, "{elapsed:?} a batch");
        let chosen = m.chosen.expect("the first stretch was measured");
        if reopened.is_empty() {
            assert_eq!(chosen.choice.threads, 4, "{}", chosen.choice.why);
            assert!(chosen.backend.is_none());
            assert_eq!(backend.rows.len(), 25, "the first backend ran every batch");
        } else {
            assert_eq!(chosen.choice.threads, 1, "{}", chosen.choice.why);
            assert!(!chosen.choice.spinning);
            assert!(chosen.backend.is_some());
            assert_eq!(
                backend.rows.len(),
                PILOT_BATCHES + 1,
                "then the reopened one ran"
            );
        }
    }
}

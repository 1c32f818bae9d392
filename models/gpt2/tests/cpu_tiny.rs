//! The correctness backbone of the GPT-2 trainer, on the CPU executor (no GPU): the tiny
//! configuration (2 layers, 2 heads of 32, width 64, context 16, vocabulary 61 padded to 64)
//! runs the same model code as the GPU, through the same library kernels.

use gpt2::config::Config;
use gpt2::cpu::Cpu;
use gpt2::data::{Loader, synthetic_corpus};
use gpt2::layout::{Layout, TENSORS, Tensor, init_params};
use gpt2::model::Shape;
use gpt2::train::{Hyper, Trainer};

fn tiny_trainer(shape: Shape, hyper: Hyper) -> Trainer<Cpu, f32> {
    let config = Config::tiny();
    let master = init_params(&Layout::new(&config), 7);
    Trainer::new(Cpu::new(), &config, shape, hyper, &master).unwrap()
}

/// Training on structured data: the loss is finite and falls well below its start.
#[test]
fn tiny_loss_falls_on_structured_corpus() {
    let shape = Shape { batch: 2, seq: 16 };
    let hyper = Hyper { learning_rate: 3e-3, ..Hyper::default() };
    let mut trainer = tiny_trainer(shape, hyper);
    let mut loader = Loader::new(synthetic_corpus(4096, 61, 1), shape.batch, shape.seq, 0, 1).unwrap();
    let mut losses = Vec::new();
    for _ in 0..20 {
        let (x, y) = loader.next_batch();
        trainer.set_batch(&x, &y).unwrap();
        let loss = trainer.forward().unwrap();
        trainer.backward().unwrap();
        trainer.update().unwrap();
        assert!(loss.is_finite(), "loss {loss} is not finite");
        losses.push(loss);
    }
    println!("losses: {losses:?}");
    // Random init: close to ln(61) = 4.11.
    assert!((losses[0] - 61f32.ln()).abs() < 0.3, "first loss {} is far from ln(61)", losses[0]);
    // Batches of 32 tokens are noisy: compare the mean of the last four with the first.
    let tail = losses[16..].iter().sum::<f32>() / 4.0;
    assert!(tail < losses[0] - 0.35, "the loss did not fall: {losses:?}");
}

/// The analytic gradient of every parameter tensor against central finite differences of the
/// loss (f32 everywhere; the host GEMM accumulates in f64), at the entry of each tensor with
/// the largest gradient and one other.
#[test]
fn tiny_gradients_match_finite_differences() {
    let shape = Shape { batch: 2, seq: 16 };
    let mut trainer = tiny_trainer(shape, Hyper::default());
    let (x, y) = Loader::new(synthetic_corpus(1024, 61, 3), shape.batch, shape.seq, 0, 1).unwrap().next_batch();
    trainer.set_batch(&x, &y).unwrap();
    trainer.forward().unwrap();
    trainer.backward().unwrap();
    let grads = trainer.gradients().unwrap();
    let master = trainer.state().unwrap().0;
    let layout = trainer.layout.clone();
    let mut loss_at = |i: usize, delta: f32| {
        let mut p = master.clone();
        p[i] += delta;
        trainer.set_master(&p).unwrap();
        trainer.forward().unwrap()
    };
    let eps = 1e-2f32;
    let mut checked = 0;
    for t in TENSORS {
        let r = layout.all(t);
        let g = &grads[r.clone()];
        let biggest = (0..g.len()).max_by(|&a, &b| g[a].abs().total_cmp(&g[b].abs())).unwrap();
        for i in [r.start + biggest, r.start + (g.len() * 2) / 3] {
            let numeric = (loss_at(i, eps) - loss_at(i, -eps)) / (2.0 * eps);
            let analytic = grads[i];
            let err = (numeric - analytic).abs();
            let bound = 2e-3 + 0.05 * analytic.abs().max(numeric.abs());
            println!("{t:?}[{}]: analytic {analytic:+.6e} numeric {numeric:+.6e}", i - r.start);
            assert!(err <= bound, "{t:?} element {}: analytic {analytic} vs finite difference {numeric}", i - r.start);
            checked += 1;
        }
    }
    assert_eq!(checked, 32);
    // Padded vocabulary rows never get a gradient.
    let wte = layout.all(Tensor::Wte);
    let c = Config::tiny().channels;
    assert!(grads[wte.start + 61 * c..wte.end].iter().all(|&g| g == 0.0), "padded token rows got a gradient");
}

/// A run saved after 2 steps and resumed (model file plus state file) continues exactly as
/// the run that never stopped.
#[test]
fn tiny_checkpoint_resume_continues_the_run() {
    use gpt2::checkpoint::{State, read_model, read_state, state_path, write_model, write_state};
    let shape = Shape { batch: 2, seq: 16 };
    let hyper = Hyper { learning_rate: 3e-3, ..Hyper::default() };
    let corpus = synthetic_corpus(4096, 61, 5);
    let step = |t: &mut Trainer<Cpu, f32>, l: &mut Loader| {
        let (x, y) = l.next_batch();
        t.set_batch(&x, &y).unwrap();
        t.forward().unwrap();
        t.backward().unwrap();
        t.update().unwrap();
    };
    let mut straight = tiny_trainer(shape, hyper);
    let mut loader = Loader::new(corpus.clone(), 2, 16, 0, 1).unwrap();
    for _ in 0..3 {
        step(&mut straight, &mut loader);
    }
    let mut first = tiny_trainer(shape, hyper);
    let mut loader1 = Loader::new(corpus.clone(), 2, 16, 0, 1).unwrap();
    for _ in 0..2 {
        step(&mut first, &mut loader1);
    }
    let dir = std::env::temp_dir().join(format!("gpt2-resume-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("tiny.bin");
    let (master, m, v) = first.state().unwrap();
    write_model(&path, &Config::tiny(), &master, false).unwrap();
    write_state(&state_path(&path), &State { step: first.step, position: loader1.position(), world: 1, master, m, v }).unwrap();
    let (config, params) = read_model(&path).unwrap();
    let state = read_state(&state_path(&path), params.len()).unwrap();
    let mut resumed = Trainer::<Cpu, f32>::new(Cpu::new(), &config, shape, hyper, &params).unwrap();
    resumed.restore(&state.master, &state.m, &state.v, state.step).unwrap();
    let mut loader2 = Loader::new(corpus, 2, 16, 0, 1).unwrap();
    loader2.seek(state.position);
    assert_eq!(resumed.state().unwrap(), first.state().unwrap(), "the state did not survive the files");
    step(&mut resumed, &mut loader2);
    std::fs::remove_dir_all(&dir).unwrap();
    // The executor runs blocks on several threads, so f32 atomic sums (the squared gradient
    // norm, the token-embedding scatter) may add in another order: last-bit differences,
    // not drift.
    let (a, b) = (resumed.state().unwrap(), straight.state().unwrap());
    for (name, x, y) in [("master", &a.0, &b.0), ("m", &a.1, &b.1), ("v", &a.2, &b.2)] {
        let worst = x.iter().zip(y.iter()).map(|(p, q)| (p - q).abs()).fold(0.0f32, f32::max);
        println!("{name}: largest difference {worst:.2e}");
        // One AdamW step moves a weight by at most about lr = 3e-3.
        assert!(worst < 1e-4, "{name}: a resumed run drifted from the one that never stopped ({worst:e})");
    }
}

/// Two backward passes of one batch give the same gradients (nothing accumulates): the same
/// bits, except the token table's, a sum of f32 atomics whose order the executor's threads
/// may change under load (seen once with the whole suite running): within 1e-6 there, far
/// below the doubling an accumulating pass would give.
#[test]
fn tiny_backward_is_repeatable() {
    let shape = Shape { batch: 2, seq: 16 };
    let mut t = tiny_trainer(shape, Hyper::default());
    let (x, y) = Loader::new(synthetic_corpus(1024, 61, 3), 2, 16, 0, 1).unwrap().next_batch();
    t.set_batch(&x, &y).unwrap();
    t.forward().unwrap();
    t.backward().unwrap();
    let g1 = t.gradients().unwrap();
    t.forward().unwrap();
    t.backward().unwrap();
    let g2 = t.gradients().unwrap();
    let layout = t.layout.clone();
    for tensor in TENSORS {
        let r = layout.all(tensor);
        let d = r.clone().filter(|&i| g1[i] != g2[i]).count();
        println!("{tensor:?}: {d} of {} differ", r.len());
    }
    for tensor in TENSORS {
        let r = layout.all(tensor);
        if tensor == Tensor::Wte {
            let worst = r.map(|i| (g1[i] - g2[i]).abs()).fold(0.0f32, f32::max);
            assert!(worst <= 1e-6, "Wte gradients differ by {worst}");
        } else {
            assert_eq!(g1[r.clone()], g2[r], "{tensor:?} gradients differ");
        }
    }
}

/// The bf16 path (bf16 parameters and activations, f32 master weights and gradients) on the
/// CPU executor: its first loss is the f32 loss to bf16 accuracy, and it trains.
#[test]
fn tiny_bf16_tracks_f32() {
    let config = Config::tiny();
    let master = init_params(&Layout::new(&config), 7);
    let shape = Shape { batch: 2, seq: 16 };
    let hyper = Hyper { learning_rate: 3e-3, ..Hyper::default() };
    let mut t16 = Trainer::<Cpu, half::bf16>::new(Cpu::new(), &config, shape, hyper, &master).unwrap();
    let mut t32 = tiny_trainer(shape, hyper);
    let mut loader = Loader::new(synthetic_corpus(4096, 61, 1), 2, 16, 0, 1).unwrap();
    let mut pairs = Vec::new();
    for _ in 0..6 {
        let (x, y) = loader.next_batch();
        t16.set_batch(&x, &y).unwrap();
        let a = t16.forward().unwrap();
        t16.backward().unwrap();
        t16.update().unwrap();
        t32.set_batch(&x, &y).unwrap();
        let b = t32.forward().unwrap();
        t32.backward().unwrap();
        t32.update().unwrap();
        pairs.push(a);
        pairs.push(b);
    }
    println!("bf16/f32 losses: {pairs:?}");
    assert!(pairs.iter().all(|l| l.is_finite()));
    assert!((pairs[0] - pairs[1]).abs() < 0.02, "first loss bf16 {} vs f32 {}", pairs[0], pairs[1]);
    assert!((pairs[10] - pairs[11]).abs() < 0.1, "sixth loss bf16 {} vs f32 {}", pairs[10], pairs[11]);
}

/// `use_graph` on a backend that records no graphs (the CPU executor) falls back to eager
/// backward passes: no graph, and the same losses and weights as a run without it (up to the
/// order of the f32 atomic adds, as in the resume test).
#[test]
fn tiny_graph_request_falls_back_to_eager_on_the_cpu() {
    let shape = Shape { batch: 2, seq: 16 };
    let hyper = Hyper { learning_rate: 3e-3, ..Hyper::default() };
    let corpus = synthetic_corpus(4096, 61, 1);
    let run = |graph: bool| {
        let mut trainer = tiny_trainer(shape, hyper);
        trainer.use_graph = graph;
        let mut loader = Loader::new(corpus.clone(), shape.batch, shape.seq, 0, 1).unwrap();
        let mut losses = Vec::new();
        for _ in 0..3 {
            let (x, y) = loader.next_batch();
            trainer.set_batch(&x, &y).unwrap();
            losses.push(trainer.forward().unwrap());
            trainer.backward().unwrap();
            trainer.update().unwrap();
        }
        assert!(!trainer.graph_recorded(), "the CPU executor recorded a graph");
        (losses, trainer.state().unwrap().0)
    };
    let (eager, graphed) = (run(false), run(true));
    assert_eq!(eager.0.len(), 3);
    for (a, b) in eager.0.iter().zip(&graphed.0) {
        assert!((a - b).abs() <= 1e-5, "losses {:?} vs {:?}", eager.0, graphed.0);
    }
    let worst = eager.1.iter().zip(&graphed.1).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
    assert!(worst < 1e-4, "weights differ by {worst}");
}

/// The bf16 backward pass, tensor by tensor: at the same master weights and batch (after two
/// training steps, so no tensor is at its initial value), each of the 16 gradients of the
/// bf16 path is the f32 gradient (checked against finite differences above) up to bf16
/// rounding: `|g16 - g32| / |g32| < 0.03` in the 2-norm (measured: at most 0.008). bf16
/// activations and activation gradients carry a relative error of ~2^-9 each, and their sum
/// over the few operations on any path stays below 1e-2; a wrong scale, a lost term or a
/// wrongly rounded accumulator in one of the bf16 kernels (norm, classifier, attention,
/// bias, embedding backward) is O(1). Head dims 32 (the tiny model: the portable attention)
/// and 64 (GPT-2 124M's: the tensor-core attention, on the `mma.sync` path, and on the sm_90
/// kernels, emulated, that the GPU takes on an H100/H200: `Cpu::with_sm90_attention`), at
/// a sequence of 160 tokens for head dim 64 (two 128-row query tiles and key tiles, causal).
#[test]
fn tiny_bf16_gradients_match_f32_tensor_by_tensor() {
    let wide = Config { channels: 128, max_seq: 160, ..Config::tiny() };
    for (config, sm90) in [(Config::tiny(), false), (wide, false), (wide, true)] {
        let layout = Layout::new(&config);
        // One sequence of 160 tokens for head dim 64 (the CPU executor's time), two of 16 else.
        let shape = Shape { batch: if config.max_seq > 16 { 1 } else { 2 }, seq: config.max_seq };
        let hyper = Hyper { learning_rate: 3e-3, ..Hyper::default() };
        let mut t32 = Trainer::<Cpu, f32>::new(Cpu::new(), &config, shape, hyper, &init_params(&layout, 11)).unwrap();
        let mut loader = Loader::new(synthetic_corpus(4096, 61, 4), shape.batch, shape.seq, 0, 1).unwrap();
        for _ in 0..2 {
            let (x, y) = loader.next_batch();
            t32.set_batch(&x, &y).unwrap();
            t32.forward().unwrap();
            t32.backward().unwrap();
            t32.update().unwrap();
        }
        let master = t32.state().unwrap().0;
        let backend = if sm90 { Cpu::with_sm90_attention() } else { Cpu::new() };
        let mut t16 = Trainer::<Cpu, half::bf16>::new(backend, &config, shape, hyper, &master).unwrap();
        let (x, y) = loader.next_batch();
        let grads = [t32.gradients_at(&x, &y), t16.gradients_at(&x, &y)];
        let mut report = Vec::new();
        for tensor in TENSORS {
            let r = layout.all(tensor);
            let (g32, g16) = (&grads[0].1[r.clone()], &grads[1].1[r]);
            let norm = g32.iter().map(|g| (*g as f64).powi(2)).sum::<f64>().sqrt();
            let err = g32.iter().zip(g16).map(|(a, b)| (*a as f64 - *b as f64).powi(2)).sum::<f64>().sqrt();
            report.push((tensor, err / norm.max(1e-30), norm));
        }
        let name = format!("head dim {}{}", config.head_dim(), if sm90 { " (sm_90 attention, emulated)" } else { "" });
        println!("{name}: loss f32 {} bf16 {}; per tensor (relative error, |g|): {report:?}", grads[0].0, grads[1].0);
        assert!((grads[0].0 - grads[1].0).abs() < 0.02, "{name}: losses f32 {} bf16 {}", grads[0].0, grads[1].0);
        for (tensor, rel, norm) in report {
            assert!(norm > 0.0, "{name}: {tensor:?} has a zero gradient");
            assert!(rel < 0.03, "{name}: {tensor:?}'s bf16 gradient is {rel:.3} (relative) from f32's");
        }
    }
}

/// One forward and backward pass at the current weights: the loss and the gradients.
trait Step {
    fn gradients_at(&mut self, x: &[u32], y: &[u32]) -> (f32, Vec<f32>);
}

impl<T: gpt2::backend::Act> Step for Trainer<Cpu, T> {
    fn gradients_at(&mut self, x: &[u32], y: &[u32]) -> (f32, Vec<f32>) {
        self.set_batch(x, y).unwrap();
        let loss = self.forward().unwrap();
        self.backward().unwrap();
        (loss, self.gradients().unwrap())
    }
}

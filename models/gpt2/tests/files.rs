//! llm.c's file formats and our state file: round trips, the header fields, and refusals that
//! say what is wrong.

use gpt2::checkpoint::{State, read_model, read_state, state_path, write_model, write_state};
use gpt2::config::Config;
use gpt2::data::{Loader, read_shard, synthetic_corpus, write_shard};
use gpt2::layout::{Layout, init_params};

fn dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("gpt2-files-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn shard_round_trip_and_header() {
    let d = dir("shard");
    let path = d.join("s.bin");
    let tokens = synthetic_corpus(1000, 50257, 1);
    write_shard(&path, &tokens).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let word = |i: usize| i32::from_le_bytes(bytes[4 * i..4 * i + 4].try_into().unwrap());
    assert_eq!((word(0), word(1), word(2)), (20240520, 1, 1000));
    assert_eq!(bytes.len(), 1024 + 2 * 1000);
    assert_eq!(read_shard(&path).unwrap(), tokens);
    std::fs::write(&path, [0u8; 1024]).unwrap();
    let e = read_shard(&path).unwrap_err().to_string();
    assert!(e.contains("magic"), "{e}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn model_round_trip_f32_and_bf16_with_llmc_header() {
    let d = dir("model");
    let config = Config::tiny();
    let params = init_params(&Layout::new(&config), 3);
    for (bf16, version, bytes_per) in [(false, 1, 4), (true, 3, 2)] {
        let path = d.join(format!("m{version}.bin"));
        write_model(&path, &config, &params, bf16).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let word = |i: usize| i32::from_le_bytes(bytes[4 * i..4 * i + 4].try_into().unwrap());
        assert_eq!((word(0), word(1)), (20240326, version));
        assert_eq!((word(2), word(3), word(4), word(5), word(6), word(7)), (16, 61, 2, 2, 64, 64));
        assert_eq!(bytes.len(), 1024 + bytes_per * params.len());
        let (back_config, back) = read_model(&path).unwrap();
        assert_eq!(back_config, config);
        let worst = back.iter().zip(&params).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
        assert!(worst <= if bf16 { 4e-3 } else { 0.0 }, "version {version}: parameters changed by {worst}");
    }
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn state_round_trip_and_size_check() {
    let d = dir("state");
    let model = d.join("m.bin");
    let n = 10;
    let state = State { step: 7, position: 1234, world: 2, master: (0..n).map(|i| i as f32).collect(), m: vec![0.5; n], v: vec![0.25; n] };
    write_state(&state_path(&model), &state).unwrap();
    assert_eq!(read_state(&state_path(&model), n).unwrap(), state);
    let e = read_state(&state_path(&model), n + 1).unwrap_err().to_string();
    assert!(e.contains("parameters"), "{e}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn loader_interleaves_ranks_and_wraps() {
    let tokens: Vec<u16> = (0..100).collect();
    let mut r0 = Loader::new(tokens.clone(), 2, 5, 0, 2).unwrap();
    let mut r1 = Loader::new(tokens.clone(), 2, 5, 1, 2).unwrap();
    let (x0, y0) = r0.next_batch();
    let (x1, _) = r1.next_batch();
    assert_eq!(x0, (0..10).collect::<Vec<u32>>());
    assert_eq!(y0, (1..11).collect::<Vec<u32>>());
    assert_eq!(x1, (10..20).collect::<Vec<u32>>());
    assert_eq!(r0.next_batch().0[0], 20);
    for _ in 0..3 {
        r0.next_batch();
    }
    // 80 + 10 + 1 > 100: back to the rank's first window.
    assert_eq!(r0.next_batch().0[0], 0);
    assert!(Loader::new(tokens, 10, 10, 0, 1).is_err(), "100 tokens cannot fill 10 x 10 + 1");
}

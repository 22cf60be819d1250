//! Signing and verifying one tracking token, and one replay check: the per-ad and per-beacon
//! costs the edge pays.

use std::hint::black_box;
use std::num::NonZeroU64;

use criterion::{Criterion, criterion_group, criterion_main};
use marquee_tracking::{Claims, KeyRing, ReplayConfig, ReplayGuard, TOKEN_LEN, TokenKind};

const NOW: i64 = 1_790_000_000;

fn claims(nonce: u64) -> Claims {
    Claims {
        kind: TokenKind::Impression,
        line_item: 12_345,
        creative: 67_890,
        placement: NonZeroU64::new(4_242),
        user: 0x9e37_79b9_7f4a_7c15,
        issued_at: NOW,
        lifetime: 3_600,
        nonce,
        amount_micros: Some(1_500_000),
    }
}

fn tokens(c: &mut Criterion) {
    let ring = KeyRing::from_config(
        2,
        [
            (
                1,
                "hex:000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f",
            ),
            (
                2,
                "hex:8f2a51c94d0e7b3316aa0c5e9b72d4f1e03c6a8b5d17f9e2c40b6a39d5e8f712",
            ),
        ],
    )
    .unwrap_or_else(|e| panic!("bench keys: {e}"));
    let claims = claims(0x0123_4567_89ab_cdef);
    let token = ring.sign(&claims);

    c.bench_function("sign (new String)", |b| {
        b.iter(|| ring.sign(black_box(&claims)))
    });
    let mut buf = String::with_capacity(TOKEN_LEN);
    c.bench_function("sign_into (reused buffer)", |b| {
        b.iter(|| {
            buf.clear();
            ring.sign_into(black_box(&claims), &mut buf);
        })
    });
    c.bench_function("verify (valid)", |b| {
        b.iter(|| ring.verify(black_box(&token), black_box(NOW)))
    });
    let mut forged = token.clone().into_bytes();
    forged[50] = if forged[50] == b'A' { b'B' } else { b'A' };
    let forged = String::from_utf8(forged).unwrap_or_else(|e| panic!("ascii: {e}"));
    c.bench_function("verify (bad MAC)", |b| {
        b.iter(|| ring.verify(black_box(&forged), black_box(NOW)))
    });
}

fn replay(c: &mut Criterion) {
    let guard = ReplayGuard::new(ReplayConfig::default());
    // Pre-fill with 100,000 live nonces so lookups hit populated sets.
    for nonce in 0..100_000u64 {
        guard.first_time(nonce, NOW + 600 + (nonce % 3_000) as i64, NOW);
    }
    let mut nonce = 1u64 << 40;
    c.bench_function("replay first_time (new nonce)", |b| {
        b.iter(|| {
            nonce += 1;
            guard.first_time(black_box(nonce), NOW + 1_800, NOW)
        })
    });
    c.bench_function("replay first_time (repeat)", |b| {
        b.iter(|| guard.first_time(black_box(777), NOW + 600 + 777, NOW))
    });
}

criterion_group!(benches, tokens, replay);
criterion_main!(benches);

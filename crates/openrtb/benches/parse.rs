//! The per-bid costs this crate adds to the edge: parsing a realistic 1.5 KB bid request,
//! writing a one-bid response, validating it, and decrypting a notice price.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use marquee_openrtb::{
    Bid, BidRequest, BidResponse, MarkupType, NoConversion, PriceCrypto, SeatBid, validate_response,
};

const REQUEST: &[u8] = include_bytes!("../testdata/marquee/bench-request.json");

fn response(request: &BidRequest<'_>) -> BidResponse<'static> {
    BidResponse {
        id: request.id.to_string().into(),
        seatbid: vec![SeatBid {
            seat: Some("marquee".into()),
            bid: vec![Bid {
                id: "9f8e7d6c-1".into(),
                impid: "1".into(),
                price_micros: 1_250_000,
                adm: Some(
                    "<div><a href=\"https://edge.example/t/c?t=AbCdEfGh\" target=\"_blank\">\
                     <img src=\"https://cdn.example/c/42.jpg\" width=\"728\" height=\"90\"></a>\
                     <img src=\"https://edge.example/t/i?t=AbCdEfGh\" width=\"1\" height=\"1\"></div>"
                        .into(),
                ),
                nurl: Some("https://edge.example/n/w?b=AbCdEfGh&p=${AUCTION_PRICE}".into()),
                burl: Some("https://edge.example/n/b?b=AbCdEfGh&p=${AUCTION_PRICE}".into()),
                lurl: Some("https://edge.example/n/l?b=AbCdEfGh&r=${AUCTION_LOSS}".into()),
                adomain: vec!["brand.example".into()],
                cid: Some("17".into()),
                crid: Some("42".into()),
                cat: vec!["IAB3".into()],
                w: Some(728),
                h: Some(90),
                mtype: Some(MarkupType::BANNER),
                ..Bid::default()
            }],
        }],
        cur: Some("USD".into()),
        ..BidResponse::default()
    }
}

fn openrtb(c: &mut Criterion) {
    let mut group = c.benchmark_group("request");
    group.throughput(Throughput::Bytes(REQUEST.len() as u64));
    group.bench_function("parse_1.5kb", |b| {
        b.iter(|| BidRequest::parse(black_box(REQUEST)).map(|r| r.imp.len()))
    });
    // The same parse with serde_json and the derives alone (what the fast reader replaces).
    group.bench_function("parse_1.5kb_serde", |b| {
        b.iter(|| BidRequest::parse_with_serde(black_box(REQUEST)).map(|r| r.imp.len()))
    });
    // The floor for any serde_json parse: skipping the same bytes without keeping anything.
    group.bench_function("skip_1.5kb", |b| {
        b.iter(|| serde_json::from_slice::<serde::de::IgnoredAny>(black_box(REQUEST)).is_ok())
    });
    group.finish();

    let request = BidRequest::parse(REQUEST).unwrap_or_else(|e| panic!("bench request: {e}"));
    let response = response(&request);
    if let Err(violations) = validate_response(&request, &response, &NoConversion) {
        panic!("the bench response must be valid: {violations:?}");
    }
    let mut out = String::with_capacity(2048);
    c.bench_function("response/write_one_bid", |b| {
        b.iter(|| {
            out.clear();
            black_box(&response).write_json(&mut out);
            out.len()
        })
    });
    c.bench_function("response/validate_one_bid", |b| {
        b.iter(|| validate_response(black_box(&request), black_box(&response), &NoConversion))
    });

    let crypto = PriceCrypto::new(&[7; 32], &[9; 32]);
    let token = crypto.encrypt(1_250_000, *b"0123456789abcdef");
    c.bench_function("price/decrypt", |b| {
        b.iter(|| crypto.decrypt(black_box(&token)))
    });
}

criterion_group!(benches, openrtb);
criterion_main!(benches);

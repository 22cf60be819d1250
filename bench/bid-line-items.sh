#!/usr/bin/env bash
# Makes a data directory for bid-path benchmarks: the demo data set plus N exchange line items
# (default 1,000), each with one banner creative, created through the management API.
#
#   bench/bid-line-items.sh --data DIR [--count N] [--bin PATH]
#
# The line items are a mix an exchange bidder might carry: about a third target countries
# (alpha-2), a quarter device types, a fifth page domains, the rest nothing; sizes among the
# usual banners; CPM prices from 0.10 to 5.00 USD; one in twenty buys the deal
# DEAL-2026-0042 of `crates/openrtb/testdata/marquee/bench-request.json`; tiers mostly
# remnant. Generated from a fixed seed, so every run makes the same set. Then the server is
# stopped; start it again on DIR (without --demo) to measure, e.g.:
#
#   bench/bid-line-items.sh --data /tmp/mqbid
#   bench/ratio.sh --candidate 'env MARQUEE_EDGE__PUBLIC_URL=https://ads.example.com \
#       $MARQUEE_BIN serve --data /tmp/mqbid --listen 127.0.0.1:0' \
#       --body-file crates/openrtb/testdata/marquee/bench-request.json --path /openrtb2/bid
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
data=""
count=1000
bin="${CARGO_TARGET_DIR:-$root/target}/release/marquee"
die() { echo "bid-line-items.sh: $*" >&2; exit 64; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --data) data="$2"; shift 2 ;;
    --count) count="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
[[ -n "$data" ]] || die "--data DIR is required"
[[ ! -e "$data" ]] || die "$data exists; give a new directory"
[[ -x "$bin" ]] || die "$bin is missing (cargo build --release -p marquee, or --bin)"

work="$(mktemp -d)"
pid=""
cleanup() {
  [[ -n "$pid" ]] && kill "$pid" 2> /dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

MARQUEE_SNAPSHOT__COMPILE_INTERVAL_MS=200 "$bin" serve --demo --data "$data" \
  --listen 127.0.0.1:0 > "$work/stdout" 2> "$work/stderr" &
pid=$!
addr=""
token=""
for _ in $(seq 300); do
  addr="$(head -n 1 "$work/stdout" | sed -n 's|.*listening on http://\([^ /]*\).*|\1|p')"
  token="$(grep -o 'mq_[A-Za-z0-9_-]*' "$work/stderr" | head -n 1 || true)"
  [[ -n "$addr" && -n "$token" ]] && break
  kill -0 "$pid" 2> /dev/null || { cat "$work/stderr" >&2; die "the server stopped"; }
  sleep 0.1
done
[[ -n "$addr" && -n "$token" ]] || die "no address or demo admin token from the server"

before="$(curl -s "http://$addr/metrics" | sed -n 's/^marquee_snapshot_version \([0-9]*\)$/\1/p')"
before="${before:-0}"
python3 - "$addr" "$token" "$count" <<'PY'
import http.client, json, random, sys

addr, token, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
host, port = addr.rsplit(":", 1)
conn = http.client.HTTPConnection(host, int(port))
rng = random.Random(20261121)

def post(path, body):
    conn.request("POST", "/api/v1/" + path, json.dumps(body),
                 {"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    reply = conn.getresponse()
    text = reply.read()
    if reply.status != 201:
        sys.exit("%s: %d %s" % (path, reply.status, text[:300]))
    return json.loads(text)["id"]

advertiser = post("advertisers", {"name": "Bench Bidder", "currency": "USD",
                                  "time_zone": "UTC", "domains": ["bench-brand.example"]})
categories = ["IAB1", "IAB2", "IAB3", "IAB5", "IAB8", "IAB9", "IAB13", "IAB17", "IAB19", "IAB20"]
campaigns = [post("campaigns", {"advertiser_id": advertiser, "name": "Bench %d" % i,
                                "categories": [categories[i % len(categories)]]})
             for i in range(50)]
countries = ["US", "GB", "DE", "FR", "ES", "IT", "NL", "SE", "PL", "CA", "AU", "JP", "BR", "MX",
             "IN", "AT", "CH", "BE", "DK", "NO", "FI", "IE", "PT", "CZ", "NZ", "ZA", "AR", "CL",
             "KR", "SG"]
devices = ["desktop", "phone", "tablet", "ctv"]
domains = ["news.example.com", "sports.example.com", "weather.example.org", "recipes.example.net",
           "cars.example.com", "travel.example.org", "tech.example.net", "money.example.com"]
sizes = [(300, 250), (728, 90), (160, 600), (320, 50), (970, 90), (468, 60), (300, 600)]
tiers = ["remnant"] * 8 + ["standard"] * 2
for i in range(count):
    kind = rng.random()
    if kind < 0.35:
        targeting = {"country": rng.sample(countries, rng.randint(1, 4))}
    elif kind < 0.60:
        targeting = {"device_type": rng.sample(devices, rng.randint(1, 2))}
    elif kind < 0.80:
        targeting = {"domain": rng.sample(domains, rng.randint(1, 3))}
    else:
        targeting = None
    line_item = {
        "campaign_id": campaigns[i % len(campaigns)], "name": "Bench line item %d" % i,
        "start": "2026-01-01T00:00:00", "time_zone": "UTC", "tier": rng.choice(tiers),
        "channels": ["exchange"],
        "price": {"model": "cpm", "amount_micros": rng.randint(1, 50) * 100_000, "currency": "USD"},
        "deals": ["DEAL-2026-0042"] if i % 20 == 0 else [],
    }
    if targeting:
        line_item["targeting"] = targeting
    line_item_id = post("line-items", line_item)
    w, h = rng.choice(sizes)
    post("creatives", {
        "line_item_id": line_item_id, "name": "Bench %dx%d" % (w, h), "size": {"w": w, "h": h},
        "landing_url": "https://bench-brand.example/%d" % i,
        "content": {"type": "image", "image_url": "https://cdn.example.com/bench/%dx%d.png" % (w, h),
                    "alt": "Bench"},
    })
print("created %d line items with a creative each, in %d campaigns" % (count, len(campaigns)))
PY

# Wait until the served snapshot holds them (its version is the store's change counter: stable
# for two reads half a second apart, past the version before), then stop cleanly.
version() { curl -s "http://$addr/metrics" | sed -n 's/^marquee_snapshot_version \([0-9]*\)$/\1/p'; }
previous=""
for _ in $(seq 120); do
  sleep 0.5
  current="$(version)"
  [[ -n "$current" && "$current" == "$previous" && "$current" -gt "$before" ]] && break
  previous="$current"
done
kill -TERM "$pid"
wait "$pid" || true
pid=""
echo "data in $data: start with $bin serve --data $data" >&2

//! The iteration order of LLVM 22's `DenseMap<StringRef, _>`, which decides the order of the
//! string entries `llvm-offload-binary` writes.
//!
//! `llvm-offload-binary` collects each `--image=k=v,...` into a `DenseMap<StringRef, StringRef>`
//! and copies it, in iteration order (bucket order), into the image's string list. Reproducing
//! the bytes therefore needs the map's exact layout:
//! - the hash is `(unsigned)hash_value(StringRef)`: LLVM 22's `hash_short`/`hash_state`
//!   (CityHash-derived, `llvm/ADT/Hashing.h`) with the fixed seed of release builds;
//! - the table starts at 64 buckets, doubles when an insertion would make it 3/4 full, and
//!   probes quadratically (`+1, +2, +3, ...`); growing re-inserts the old buckets in order.
//!
//! Newer LLVM replaced the hash by xxh3; the tests check this one against the installed tool.

const K0: u64 = 0xc3a5_c85c_97cb_3127;
const K1: u64 = 0xb492_b66f_be98_f273;
const K2: u64 = 0x9ae1_6a3b_2f90_404f;
const K3: u64 = 0xc949_d7c7_509e_6557;
/// `get_execution_seed()` in builds without ABI-breaking checks (every release package).
const SEED: u64 = 0xff51_afd7_ed55_8ccd;

fn fetch64(s: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&s[at..at + 8]);
    u64::from_le_bytes(a)
}

fn fetch32(s: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&s[at..at + 4]);
    u64::from(u32::from_le_bytes(a))
}

fn shift_mix(v: u64) -> u64 {
    v ^ (v >> 47)
}

fn hash_16_bytes(low: u64, high: u64) -> u64 {
    const MUL: u64 = 0x9ddf_ea08_eb38_2d69;
    let mut a = (low ^ high).wrapping_mul(MUL);
    a ^= a >> 47;
    let mut b = (high ^ a).wrapping_mul(MUL);
    b ^= b >> 47;
    b.wrapping_mul(MUL)
}

fn hash_1to3(s: &[u8], seed: u64) -> u64 {
    let len = s.len();
    let y = u64::from(u32::from(s[0]) + (u32::from(s[len >> 1]) << 8));
    let z = u64::from(len as u32 + (u32::from(s[len - 1]) << 2));
    shift_mix(y.wrapping_mul(K2) ^ z.wrapping_mul(K3) ^ seed).wrapping_mul(K2)
}

fn hash_4to8(s: &[u8], seed: u64) -> u64 {
    let len = s.len();
    let a = fetch32(s, 0);
    hash_16_bytes(
        (len as u64).wrapping_add(a << 3),
        seed ^ fetch32(s, len - 4),
    )
}

fn hash_9to16(s: &[u8], seed: u64) -> u64 {
    let len = s.len();
    let a = fetch64(s, 0);
    let b = fetch64(s, len - 8);
    hash_16_bytes(
        seed ^ a,
        b.wrapping_add(len as u64).rotate_right(len as u32),
    ) ^ b
}

fn hash_17to32(s: &[u8], seed: u64) -> u64 {
    let len = s.len();
    let a = fetch64(s, 0).wrapping_mul(K1);
    let b = fetch64(s, 8);
    let c = fetch64(s, len - 8).wrapping_mul(K2);
    let d = fetch64(s, len - 16).wrapping_mul(K0);
    hash_16_bytes(
        a.wrapping_sub(b)
            .rotate_right(43)
            .wrapping_add((c ^ seed).rotate_right(30))
            .wrapping_add(d),
        a.wrapping_add((b ^ K3).rotate_right(20))
            .wrapping_sub(c)
            .wrapping_add(len as u64)
            .wrapping_add(seed),
    )
}

fn hash_33to64(s: &[u8], seed: u64) -> u64 {
    let len = s.len();
    let mut z = fetch64(s, 24);
    let mut a = fetch64(s, 0).wrapping_add(
        (len as u64)
            .wrapping_add(fetch64(s, len - 16))
            .wrapping_mul(K0),
    );
    let mut b = a.wrapping_add(z).rotate_right(52);
    let mut c = a.rotate_right(37);
    a = a.wrapping_add(fetch64(s, 8));
    c = c.wrapping_add(a.rotate_right(7));
    a = a.wrapping_add(fetch64(s, 16));
    let vf = a.wrapping_add(z);
    let vs = b.wrapping_add(a.rotate_right(31)).wrapping_add(c);
    a = fetch64(s, 16).wrapping_add(fetch64(s, len - 32));
    z = fetch64(s, len - 8);
    b = a.wrapping_add(z).rotate_right(52);
    c = a.rotate_right(37);
    a = a.wrapping_add(fetch64(s, len - 24));
    c = c.wrapping_add(a.rotate_right(7));
    a = a.wrapping_add(fetch64(s, len - 16));
    let wf = a.wrapping_add(z);
    let ws = b.wrapping_add(a.rotate_right(31)).wrapping_add(c);
    let r = shift_mix(
        vf.wrapping_add(ws)
            .wrapping_mul(K2)
            .wrapping_add(wf.wrapping_add(vs).wrapping_mul(K0)),
    );
    shift_mix((seed ^ r.wrapping_mul(K0)).wrapping_add(vs)).wrapping_mul(K2)
}

fn hash_short(s: &[u8], seed: u64) -> u64 {
    match s.len() {
        0 => K2 ^ seed,
        1..=3 => hash_1to3(s, seed),
        4..=8 => hash_4to8(s, seed),
        9..=16 => hash_9to16(s, seed),
        17..=32 => hash_17to32(s, seed),
        _ => hash_33to64(s, seed),
    }
}

struct State {
    h: [u64; 7],
}

impl State {
    fn create(s: &[u8], seed: u64) -> State {
        let h4 = seed.wrapping_mul(K1);
        let h5 = shift_mix(seed);
        let mut st = State {
            h: [
                0,
                seed,
                hash_16_bytes(seed, K1),
                (seed ^ K1).rotate_right(49),
                h4,
                h5,
                hash_16_bytes(h4, h5),
            ],
        };
        st.mix(s);
        st
    }

    fn mix_32_bytes(s: &[u8], a: &mut u64, b: &mut u64) {
        *a = a.wrapping_add(fetch64(s, 0));
        let c = fetch64(s, 24);
        *b = b.wrapping_add(*a).wrapping_add(c).rotate_right(21);
        let d = *a;
        *a = a.wrapping_add(fetch64(s, 8)).wrapping_add(fetch64(s, 16));
        *b = b.wrapping_add(a.rotate_right(44)).wrapping_add(d);
        *a = a.wrapping_add(c);
    }

    fn mix(&mut self, s: &[u8]) {
        let h = &mut self.h;
        h[0] = h[0]
            .wrapping_add(h[1])
            .wrapping_add(h[3])
            .wrapping_add(fetch64(s, 8))
            .rotate_right(37)
            .wrapping_mul(K1);
        h[1] = h[1]
            .wrapping_add(h[4])
            .wrapping_add(fetch64(s, 48))
            .rotate_right(42)
            .wrapping_mul(K1);
        h[0] ^= h[6];
        h[1] = h[1].wrapping_add(h[3]).wrapping_add(fetch64(s, 40));
        h[2] = h[2].wrapping_add(h[5]).rotate_right(33).wrapping_mul(K1);
        h[3] = h[4].wrapping_mul(K1);
        h[4] = h[0].wrapping_add(h[5]);
        let (mut a, mut b) = (h[3], h[4]);
        Self::mix_32_bytes(s, &mut a, &mut b);
        (h[3], h[4]) = (a, b);
        h[5] = h[2].wrapping_add(h[6]);
        h[6] = h[1].wrapping_add(fetch64(s, 16));
        let (mut a, mut b) = (h[5], h[6]);
        Self::mix_32_bytes(&s[32..], &mut a, &mut b);
        (h[5], h[6]) = (a, b);
        h.swap(0, 2);
    }

    fn finalize(&self, len: usize) -> u64 {
        let h = &self.h;
        hash_16_bytes(
            hash_16_bytes(h[3], h[5])
                .wrapping_add(shift_mix(h[1]).wrapping_mul(K1))
                .wrapping_add(h[2]),
            hash_16_bytes(h[4], h[6])
                .wrapping_add(shift_mix(len as u64).wrapping_mul(K1))
                .wrapping_add(h[0]),
        )
    }
}

/// LLVM 22's `hash_value(StringRef)` (`hash_combine_range` over the bytes).
pub fn hash_value(s: &[u8]) -> u64 {
    let len = s.len();
    if len <= 64 {
        return hash_short(s, SEED);
    }
    let mut st = State::create(&s[..64], SEED);
    let aligned_end = len & !63;
    let mut at = 64;
    while at != aligned_end {
        st.mix(&s[at..at + 64]);
        at += 64;
    }
    if len & 63 != 0 {
        st.mix(&s[len - 64..]);
    }
    st.finalize(len)
}

/// The iteration order of a `DenseMap<StringRef, _>` after inserting `keys` in order (a key
/// already present is not inserted again, as `try_emplace` does).
pub fn dense_map_order<'k>(keys: &[&'k str]) -> Vec<&'k str> {
    let mut buckets: Vec<Option<(&'k str, u32)>> = Vec::new();
    let mut entries = 0usize;
    for &key in keys {
        if buckets.iter().flatten().any(|(k, _)| *k == key) {
            continue;
        }
        if (entries + 1) * 4 >= buckets.len() * 3 {
            let size = (buckets.len() * 2).max(64);
            let old = std::mem::replace(&mut buckets, vec![None; size]);
            for (k, h) in old.into_iter().flatten() {
                let at = probe(&buckets, h);
                buckets[at] = Some((k, h));
            }
        }
        let h = hash_value(key.as_bytes()) as u32;
        let at = probe(&buckets, h);
        buckets[at] = Some((key, h));
        entries += 1;
    }
    buckets.into_iter().flatten().map(|(k, _)| k).collect()
}

/// The first free bucket of `hash`'s quadratic probe sequence; the table always has one.
fn probe<T>(buckets: &[Option<T>], hash: u32) -> usize {
    let mask = buckets.len() - 1;
    let mut at = hash as usize & mask;
    let mut step = 1;
    while buckets[at].is_some() {
        at = (at + step) & mask;
        step += 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observed_orders() {
        let order = |keys: &[&str]| -> Vec<String> {
            dense_map_order(keys)
                .into_iter()
                .filter(|k| *k != "file" && *k != "kind")
                .map(str::to_owned)
                .collect()
        };
        assert_eq!(
            order(&["file", "triple", "arch", "kind"]),
            ["arch", "triple"]
        );
        assert_eq!(
            order(&["file", "triple", "arch", "feature", "kind"]),
            ["feature", "arch", "triple"]
        );
        assert_eq!(
            order(&["file", "kind", "triple", "arch", "foo", "bar"]),
            ["arch", "bar", "triple", "foo"]
        );
    }

    #[test]
    fn growth_keeps_every_key_once() {
        let names: Vec<String> = (0..200).map(|i| format!("key{i}")).collect();
        let mut keys: Vec<&str> = names.iter().map(String::as_str).collect();
        keys.push("key7");
        let order = dense_map_order(&keys);
        assert_eq!(order.len(), 200);
        let long = "x".repeat(200);
        assert_ne!(
            hash_value(long.as_bytes()),
            hash_value(&long.as_bytes()[1..])
        );
    }
}

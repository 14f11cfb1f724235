//! A kernel's launch bound (`#[kernel(max_threads = N)]`, CUDA's `__launch_bounds__(N)`) as
//! its device bitcode carries it to the device link: a static named [`symbol`]`(kernel, N)`,
//! which the link reads, turns into the processor's attribute (NVIDIA's `.maxntid`, AMD's flat
//! work-group size) and removes. The bound is in the name, where the link reads it without
//! decoding the static's bytes.

/// Prefix of the static that carries a kernel's bound: `PREFIX<kernel>.<bound>`.
pub const PREFIX: &str = crate::abi::LAUNCH_BOUNDS_PREFIX;

/// The most threads a block may have on any device: a bound is 1 to this.
pub const MAX_BLOCK_THREADS: u32 = 1024;

/// The name of the static that carries `kernel`'s bound `max_threads`.
pub fn symbol(kernel: &str, max_threads: u32) -> String {
    format!("{PREFIX}{kernel}.{max_threads}")
}

/// The kernel and bound a static's name carries, if it is such a name with a bound from 1 to
/// [`MAX_BLOCK_THREADS`].
pub fn parse(symbol: &str) -> Option<(&str, u32)> {
    let (kernel, bound) = symbol.strip_prefix(PREFIX)?.rsplit_once('.')?;
    let bound: u32 = bound.parse().ok()?;
    (!kernel.is_empty() && (1..=MAX_BLOCK_THREADS).contains(&bound)).then_some((kernel, bound))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bound_survives_its_symbol() {
        assert_eq!(symbol("gemm__f16", 256), format!("{PREFIX}gemm__f16.256"));
        assert_eq!(parse(&symbol("gemm__f16", 256)), Some(("gemm__f16", 256)));
        for bad in ["gemm", ".256", "k.0", "k.1025", "k.x"]
            .map(|tail| format!("{PREFIX}{tail}"))
            .into_iter()
            .chain(["other_k.256".to_owned()])
        {
            let bad = bad.as_str();
            assert_eq!(parse(bad), None, "{bad}");
        }
    }
}

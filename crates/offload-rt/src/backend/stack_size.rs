//! The stack a GPU thread gets, as `OFFLOAD_KERNEL_STACK` asks.

/// The stack a GPU thread gets, in bytes, as `OFFLOAD_KERNEL_STACK` asks: a number of bytes,
/// or of KiB, MiB or GiB with a `K`, `M` or `G` suffix. `None` (each device's default) when
/// unset, zero or not such a number.
pub(crate) fn kernel_stack() -> Option<usize> {
    parse_stack_size(&std::env::var("OFFLOAD_KERNEL_STACK").ok()?)
}

pub(crate) fn parse_stack_size(text: &str) -> Option<usize> {
    let text = text.trim();
    let (digits, shift) = match text.as_bytes().last()? {
        b'k' | b'K' => (&text[..text.len() - 1], 10),
        b'm' | b'M' => (&text[..text.len() - 1], 20),
        b'g' | b'G' => (&text[..text.len() - 1], 30),
        _ => (text, 0),
    };
    let n = digits.trim().parse::<usize>().ok()?;
    n.checked_mul(1 << shift).filter(|&n| n > 0)
}

#[cfg(test)]
mod stack_size_tests {
    #[test]
    fn stack_sizes_read_as_bytes_or_with_a_binary_suffix() {
        let parse = super::parse_stack_size;
        assert_eq!(parse("65536"), Some(65536));
        assert_eq!(parse(" 64K "), Some(64 << 10));
        assert_eq!(parse("2m"), Some(2 << 20));
        assert_eq!(parse("1G"), Some(1 << 30));
        for bad in ["", "0", "K", "-1", "1.5M", "lots"] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }
}

use offload_rt::{device_print, device_println};

struct Point {
    x: f32,
}

fn main() {
    let p = Point { x: 1.0 };
    let n = 3u32;
    // A struct is not a scalar the device can send.
    device_println!("{}", p);
    // Widths must be literal numbers.
    device_println!("{:1$}", n, 8usize);
    // An unknown format.
    device_println!("{:s}", n);
    // A lone brace.
    device_print!("{n} }");
    // An argument the template never uses.
    device_println!("{}", n, 4u8);
    // An index past the arguments.
    device_println!("{0} {1}", n);
    // Types are checked as `format!` checks them: no `{:x}` for a float.
    device_println!("{:x}", p.x);
}

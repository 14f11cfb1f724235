//! The CPU device's levels: the fixture kernels built for `host`, `x86-64-v3` and `x86-64-v4`
//! and carried in one bundle, as `--offload-arch host,x86-64-v3,x86-64-v4` embeds them. The
//! device runs the highest level this CPU has; `OFFLOAD_CPU_LEVEL` (here
//! `CpuBackend::with_level`) picks each in turn, and every level computes the same bits: the
//! kernels' arithmetic is not contracted into fused multiply-adds where the level has them.

mod cpu_common;

use std::sync::OnceLock;

use offload_format::CpuLevel;
use offload_rt::__internal::{CpuBackend, register_bundle};
use offload_rt::{Device, DeviceBuffer, Error, LaunchConfig};
use offload_rt_test_kernels as k;

use cpu_common::MODULE;

/// The levels built and carried.
const LEVELS: [CpuLevel; 3] = [CpuLevel::Baseline, CpuLevel::X86_64V3, CpuLevel::X86_64V4];

/// Builds the fixture at every level of [`LEVELS`] and registers the images as one module,
/// once per test process; `false` (after printing why) where they cannot be built.
fn setup() -> bool {
    static READY: OnceLock<Result<(), String>> = OnceLock::new();
    let ready = READY.get_or_init(|| {
        if std::env::consts::ARCH != "x86_64" {
            return Err("the CPU levels above the baseline are x86-64's".to_owned());
        }
        let mut bundle = Vec::new();
        for level in LEVELS {
            let (bytes, kernels) = cpu_common::build_image_at(level)?;
            bundle.extend(cpu_common::bundle_at(
                MODULE,
                &kernels.join(","),
                &bytes,
                level.name(),
            ));
        }
        register_bundle("cpu_levels_test", bundle);
        Ok(())
    });
    cpu_common::is_ready(ready)
}

/// Whether this CPU runs `level`'s code.
fn has(level: CpuLevel) -> bool {
    match level {
        CpuLevel::Baseline => true,
        CpuLevel::X86_64V2 => std::arch::is_x86_feature_detected!("sse4.2"),
        CpuLevel::X86_64V3 => {
            std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
                && std::arch::is_x86_feature_detected!("bmi2")
        }
        CpuLevel::X86_64V4 => {
            std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512bw")
                && std::arch::is_x86_feature_detected!("avx512vl")
        }
        // Levels of another architecture; `e2e`'s aarch64 test runs them under qemu.
        CpuLevel::Aarch64Sve | CpuLevel::Aarch64Sve2 => false,
    }
}

/// A CPU device as `OFFLOAD_CPU_LEVEL=<value>` makes it (`None`: unset).
fn device_with(value: Option<&str>) -> Device {
    let backend = CpuBackend::new().with_level(value.map(str::to_owned));
    Device::from_backend(Box::new(backend))
}

fn device_at(level: Option<CpuLevel>) -> Device {
    device_with(level.map(CpuLevel::name))
}

/// The bits of the math kernels' results (every `kernel::math` function, f32 and f64) and of
/// a SAXPY, on `dev`.
fn results(dev: &Device) -> (Vec<u32>, Vec<u64>, Vec<u32>) {
    let n = 4099u32;
    let (x64, y64): (Vec<f64>, Vec<f64>) = (0..n).map(k::math_input).unzip();
    let x32: Vec<f32> = x64.iter().map(|&v| v as f32).collect();
    let y32: Vec<f32> = y64.iter().map(|&v| v as f32).collect();
    let config = LaunchConfig::for_num_elems(n);
    let words = n as usize * k::MATH_WORDS;

    let (dx, dy) = (
        DeviceBuffer::from_slice(dev, &x32).unwrap(),
        DeviceBuffer::from_slice(dev, &y32).unwrap(),
    );
    let mut out32 = DeviceBuffer::<f32>::zeroed(dev, words).unwrap();
    // SAFETY: the buffers hold every element the kernel reaches through its pointers.
    unsafe { k::math_f32.launch(dev, config, n, &dx, &dy, &mut out32) }.unwrap();
    let (dx64, dy64) = (
        DeviceBuffer::from_slice(dev, &x64).unwrap(),
        DeviceBuffer::from_slice(dev, &y64).unwrap(),
    );
    let mut out64 = DeviceBuffer::<f64>::zeroed(dev, words).unwrap();
    // SAFETY: as above.
    unsafe { k::math_f64.launch(dev, config, n, &dx64, &dy64, &mut out64) }.unwrap();
    let mut sy = DeviceBuffer::from_slice(dev, &y32).unwrap();
    // SAFETY: `dx` and `sy` hold `n` floats.
    unsafe { k::saxpy.launch(dev, config, n, 0.3, &dx, &mut sy) }.unwrap();
    let bits32 = |v: Vec<f32>| v.into_iter().map(f32::to_bits).collect::<Vec<_>>();
    (
        bits32(out32.to_vec().unwrap()),
        out64
            .to_vec()
            .unwrap()
            .into_iter()
            .map(f64::to_bits)
            .collect(),
        bits32(sy.to_vec().unwrap()),
    )
}

#[test]
fn each_level_runs_its_own_image_and_computes_the_same_bits() {
    if !setup() {
        return;
    }
    let baseline = device_at(Some(CpuLevel::Baseline));
    assert_eq!(baseline.load_module(MODULE).unwrap().arch, "host");
    let expected = results(&baseline);
    for level in &LEVELS[1..] {
        if !has(*level) {
            // A property of the machine, not a missing tool: the other test checks that
            // asking for this level is `Error::CpuLevel`.
            eprintln!("not run: this CPU does not have {level}");
            continue;
        }
        let dev = device_at(Some(*level));
        assert!(
            dev.describe().contains(&format!(" up to {level} (")),
            "{}",
            dev.describe()
        );
        assert_eq!(dev.load_module(MODULE).unwrap().arch, level.name());
        assert!(results(&dev) == expected, "{level} computed other bits");
    }
    let highest = LEVELS.into_iter().rev().find(|l| has(*l)).unwrap();
    let unasked = device_at(None);
    let chosen = unasked.load_module(MODULE).unwrap();
    assert_eq!(chosen.arch, highest.name(), "the level chosen unasked");
    assert!(
        unasked.describe().contains(&format!(" up to {highest} (")),
        "{}",
        unasked.describe()
    );
}

#[test]
fn a_level_the_cpu_lacks_or_no_level_at_all_is_a_typed_error() {
    if !setup() {
        return;
    }
    let err = device_with(Some("x86-64-v7"))
        .load_module(MODULE)
        .unwrap_err();
    assert!(matches!(err, Error::CpuLevel { .. }), "{err}");
    assert!(err.to_string().contains("the levels are host"), "{err}");
    // The description names no level it cannot run at; the launch says why.
    let described = device_with(Some("x86-64-v7")).describe().to_owned();
    assert!(!described.contains("up to"), "{described}");
    if let Some(above) = LEVELS.into_iter().find(|l| !has(*l)) {
        let err = device_at(Some(above)).load_module(MODULE).unwrap_err();
        assert!(err.to_string().contains("lacks"), "{err}");
    }
}

#![no_main]

use libfuzzer_sys::fuzz_target;
use offload_tools::inspect::{
    OccupancyOptions, PtxasFallback, add_occupancy, inspect_all_with, inspect_with, render_report,
    render_text,
};

// No `ptxas` runs: figures come from what the images record, whose parser is fuzzed here.
fuzz_target!(|data: &[u8]| {
    let all = inspect_all_with(data, PtxasFallback::Never);
    if let Ok(report) = &all {
        let text = render_report("in", report);
        assert!(text.contains(&format!("in: {} offload image(s)", report.images.len())));
        // Entries of an uncompressed bundle in the file itself lie inside the file.
        for b in report.bundles.iter().filter(|b| b.container == "file") {
            for e in b.entries.iter().filter(|_| b.compressed.is_none()) {
                if let Some(offset) = e.offset {
                    assert!(b.offset + offset + e.size <= data.len() as u64);
                }
            }
        }
    }
    let images = inspect_with(data, PtxasFallback::Never);
    if let Ok(images) = &images {
        let text = render_text("in", images);
        assert!(text.starts_with(&format!("in: {} offload image(s)", images.len())));
        // And with each kernel's occupancy, from whatever figures the images record.
        let mut with = images.clone();
        add_occupancy(&mut with, &OccupancyOptions::default());
        assert!(render_text("in", &with).starts_with(&format!("in: {} offload", images.len())));
    }
    // A bare run of OffloadBinaries reads the same both ways.
    if data.starts_with(&offload_format::OFFLOAD_BINARY_MAGIC) {
        assert_eq!(all.is_ok(), images.is_ok());
        if let (Ok(report), Ok(images)) = (all, images) {
            assert_eq!(report.images, images);
            assert!(report.bundles.is_empty());
        }
    }
});

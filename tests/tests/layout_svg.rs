//! The layout picture (`model_layout.svg`) is SVG 1.1 that renderers other than browsers draw
//! as browsers do: rendered with librsvg's `rsvg-convert` (`apt-get install librsvg2-bin`;
//! .ci/run installs it), every tensor is drawn in its own colour, not black.

use std::process::Command;

use memplan_tests::{describe, memplan, temp_dir, workspace_root};

/// The values of every `attribute="..."` in `text`.
fn attribute_values<'a>(text: &'a str, attribute: &str) -> Vec<&'a str> {
    let needle = format!(" {attribute}=\"");
    text.match_indices(&needle)
        .map(|(at, _)| {
            let rest = &text[at + needle.len()..];
            &rest[..rest.find('"').expect("a closed attribute")]
        })
        .collect()
}

/// `#rgb` or `#rrggbb` as red, green, blue in 0..=255.
fn hex_rgb(colour: &str) -> Option<[u8; 3]> {
    let digits = colour.strip_prefix('#')?;
    let channel = |text: &str| u8::from_str_radix(text, 16).ok();
    match digits.len() {
        3 => {
            let mut rgb = [0; 3];
            for (index, digit) in digits.chars().enumerate() {
                rgb[index] = channel(&format!("{digit}{digit}"))?;
            }
            Some(rgb)
        }
        6 => Some([
            channel(&digits[0..2])?,
            channel(&digits[2..4])?,
            channel(&digits[4..6])?,
        ]),
        _ => None,
    }
}

/// Every `fill:rgb(R%,G%,B%)` of the SVG cairo writes (`rsvg-convert -f svg`), in 0..=255.
fn rendered_fills(text: &str) -> Vec<[f64; 3]> {
    text.match_indices("fill:rgb(")
        .filter_map(|(at, needle)| {
            let rest = &text[at + needle.len()..];
            let inside = &rest[..rest.find(')')?];
            let channels: Vec<f64> = inside
                .split(',')
                .map(|part| part.trim_end_matches('%').parse::<f64>().ok())
                .collect::<Option<_>>()?;
            Some([
                channels[0] * 2.55,
                channels.get(1)? * 2.55,
                channels.get(2)? * 2.55,
            ])
        })
        .collect()
}

#[test]
fn the_layout_svg_renders_every_tensor_in_colour_outside_a_browser() {
    let dir = temp_dir("layout-svg");
    let out = dir.join("out");
    let output = memplan()
        .arg("plan")
        .arg(workspace_root().join("examples/tiny_conv.json"))
        .arg("--out")
        .arg(&out)
        .output()
        .expect("run memplan");
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let svg = std::fs::read_to_string(out.join("model_layout.svg")).unwrap();

    // SVG 1.1 colours only (hsl() is CSS 3: CairoSVG and older librsvg draw it black).
    for colour in attribute_values(&svg, "fill")
        .into_iter()
        .chain(attribute_values(&svg, "stroke"))
    {
        assert!(
            colour == "none" || hex_rgb(colour).is_some(),
            "`{colour}` is not an SVG 1.1 hex colour"
        );
    }

    // Each tensor is a rectangle with a dark outline; its fill must come out of a renderer.
    let tensor_fills: Vec<[u8; 3]> = svg
        .lines()
        .filter(|line| line.starts_with("<rect") && line.contains("stroke=\"#333\""))
        .map(|line| hex_rgb(attribute_values(line, "fill")[0]).unwrap())
        .collect();
    assert!(tensor_fills.len() >= 5, "{svg}");
    let rendered = Command::new("rsvg-convert")
        .args(["--format", "svg"])
        .arg(out.join("model_layout.svg"))
        .output()
        .expect("run rsvg-convert, librsvg's renderer (install it: apt-get install librsvg2-bin)");
    assert!(
        rendered.status.success(),
        "{}",
        String::from_utf8_lossy(&rendered.stderr)
    );
    let drawn = rendered_fills(&String::from_utf8_lossy(&rendered.stdout));
    for fill in tensor_fills {
        assert_ne!(fill, [0, 0, 0], "a tensor filled black");
        let found = drawn.iter().any(|colour| {
            colour
                .iter()
                .zip(fill)
                .all(|(drawn, wanted)| (drawn - f64::from(wanted)).abs() < 1.0)
        });
        assert!(found, "tensor colour {fill:?} not drawn: {drawn:?}");
    }
}

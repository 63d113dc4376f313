//! `{prefix}_layout.svg`: a picture of the plan, one panel per region.
//!
//! In a panel, x is the op step and y the byte offset (0 at the bottom); a tensor with bytes
//! of its own is a rectangle spanning its lifetime and its bytes, with a tooltip (name, id,
//! size, offset, lifetime) and, where it fits, a label (its id, then the end of its name). The
//! dashed line is the arena's lower bound; the tinted band between it and the top of the
//! panel (the arena size) is what the plan spends above the best possible. Aliases are not
//! drawn (their bytes are their root's).
//!
//! The file stays small and readable at any size (a million tensors would be a million
//! rectangles no viewer can show): at most [`MAX_DRAWN`] tensors are drawn one by one, those
//! that reach the top of the arena first (they decide its size), then the largest by area;
//! every other tensor is aggregated into a grid of [`CELL`]-pixel cells, each shaded gray by
//! the share of its bytes x steps in use, with runs of equal shade merged into one rectangle.
//! A panel with aggregated tensors says how many.

use std::fmt::{self, Write};

use crate::render::{Region, RenderPlan};

const WIDTH: f64 = 960.0;
const LEFT: f64 = 90.0;
const RIGHT: f64 = 20.0;
const PANEL_TITLE: f64 = 34.0;
const PLOT_HEIGHT: f64 = 220.0;
const AXIS: f64 = 36.0;
const PANEL_HEIGHT: f64 = PANEL_TITLE + PLOT_HEIGHT + AXIS;
/// Tensors drawn one by one, over all panels.
pub const MAX_DRAWN: usize = 4000;
/// Side of an aggregation cell, in pixels.
const CELL: f64 = 2.0;
/// Shades of gray the aggregated cells take (coverage quantized).
const SHADES: u32 = 8;

/// `text` escaped for XML character data and attribute values.
/// The colour of `hue` (degrees), `saturation` and `lightness` (0 to 1) as `#rrggbb`: SVG 1.1
/// has no `hsl()` (CSS 3 has), and renderers other than browsers (CairoSVG, older librsvg and
/// Inkscape) draw an `hsl()` fill black.
fn hex_colour(hue: u64, saturation: f64, lightness: f64) -> String {
    // The HSL to RGB formula of CSS Color 3: chroma, then the hue's sector.
    let chroma = (1.0 - (2.0 * lightness - 1.0).abs()) * saturation;
    let sector = (hue % 360) as f64 / 60.0;
    let second = chroma * (1.0 - (sector % 2.0 - 1.0).abs());
    let (red, green, blue) = match sector as u32 {
        0 => (chroma, second, 0.0),
        1 => (second, chroma, 0.0),
        2 => (0.0, chroma, second),
        3 => (0.0, second, chroma),
        4 => (second, 0.0, chroma),
        _ => (chroma, 0.0, second),
    };
    let base = lightness - chroma / 2.0;
    let byte = |value: f64| ((value + base) * 255.0).round().clamp(0.0, 255.0) as u8;
    format!("#{:02x}{:02x}{:02x}", byte(red), byte(green), byte(blue))
}

fn xml(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&apos;"),
            c if c.is_control() => escaped.push(' '),
            c => escaped.push(c),
        }
    }
    escaped
}

#[cfg(test)]
fn layout_svg(plan: &RenderPlan) -> Result<String, fmt::Error> {
    let mut out = String::new();
    write_layout_svg(&mut out, plan)?;
    Ok(out)
}

pub fn write_layout_svg(out: &mut dyn Write, plan: &RenderPlan) -> fmt::Result {
    let height = 40.0 + PANEL_HEIGHT * plan.regions.len().max(1) as f64;
    writeln!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height}\" \
         viewBox=\"0 0 {WIDTH} {height}\" font-family=\"sans-serif\" font-size=\"12\">"
    )?;
    writeln!(
        out,
        "<title>memplan layout of {} (plan_hash {})</title>",
        xml(&plan.prefix),
        plan.plan_hash
    )?;
    writeln!(
        out,
        "<text x=\"10\" y=\"24\" font-size=\"16\" font-weight=\"bold\">{}: {} regions, plan_hash {}</text>",
        xml(&plan.prefix),
        plan.regions.len(),
        plan.plan_hash
    )?;
    if plan.regions.is_empty() {
        writeln!(
            out,
            "<text x=\"10\" y=\"60\">The plan has no arenas: no tensor takes memory.</text>"
        )?;
    }
    let drawn_per_panel = MAX_DRAWN / plan.regions.len().max(1);
    for region in &plan.regions {
        let top = 40.0 + PANEL_HEIGHT * region.id as f64;
        write_panel(out, plan, region, top, drawn_per_panel)?;
    }
    writeln!(out, "</svg>")?;
    Ok(())
}

/// A short label for a tensor: its id, then the end of its name when the name says more
/// (converters' names are long paths whose start is shared by every tensor of a layer).
fn label_of(id: &str, name: &str) -> String {
    if name == id {
        return id.to_string();
    }
    // A fused name lists several paths separated by ';': the first names the op.
    let first = name.split(';').next().unwrap_or(name);
    let parts: Vec<&str> = first.split('/').filter(|part| !part.is_empty()).collect();
    let tail = match parts.len() {
        0 => first.to_string(),
        1 => parts[0].to_string(),
        n => format!("{}/{}", parts[n - 2], parts[n - 1]),
    };
    format!("{id} {tail}")
}

/// Which tensors of a region are drawn one by one: at most `limit`, those reaching the top of
/// the arena first, then the largest by bytes x steps.
fn drawn_tensors(plan: &RenderPlan, region: &Region, limit: usize) -> Vec<usize> {
    let mut candidates: Vec<usize> = plan
        .tensors
        .iter()
        .enumerate()
        .filter(|(_, tensor)| tensor.region == Some(region.id) && tensor.alias_of.is_none())
        .map(|(index, _)| index)
        .collect();
    if candidates.len() > limit {
        let top = region.used;
        let key = |index: usize| {
            let tensor = &plan.tensors[index];
            let at_top = tensor.offset.saturating_add(tensor.size) >= top;
            let steps = u64::from(tensor.lifetime.last - tensor.lifetime.first) + 1;
            (
                at_top,
                tensor.size.saturating_mul(steps),
                std::cmp::Reverse(index),
            )
        };
        candidates.select_nth_unstable_by_key(limit, |&index| std::cmp::Reverse(key(index)));
        candidates.truncate(limit);
    }
    candidates.sort_unstable_by_key(|&index| (plan.tensors[index].offset, index));
    candidates
}

fn write_panel(
    out: &mut dyn Write,
    plan: &RenderPlan,
    region: &Region,
    top: f64,
    drawn_limit: usize,
) -> fmt::Result {
    let steps = plan.num_steps.max(1) as f64;
    let plot_width = WIDTH - LEFT - RIGHT;
    let plot_top = top + PANEL_TITLE;
    let bottom = plot_top + PLOT_HEIGHT;
    let scale_max = region.size.max(region.lower_bound).max(1) as f64;
    let x = |step: f64| LEFT + plot_width * step / steps;
    let y = |offset: u64| bottom - PLOT_HEIGHT * offset as f64 / scale_max;

    let source = if region.is_staged() {
        format!(" (staged from {})", region.source_memory)
    } else if region.payload.is_some() {
        " (cold)".to_string()
    } else {
        String::new()
    };
    let budget = match region.budget_use_percent() {
        Some(percent) => format!(", {percent:.1}% of the {} budget", region.memory),
        None => String::new(),
    };
    writeln!(out, "<g id=\"{}\">", xml(&region.c_name))?;
    writeln!(
        out,
        "<text x=\"10\" y=\"{:.1}\" font-weight=\"bold\">region {}: {} {}{source}: {} bytes, lower bound {}, fragmentation {:.1}%{budget}</text>",
        top + 22.0,
        region.id,
        region.role.as_str(),
        xml(&region.memory),
        region.size,
        region.lower_bound,
        region.fragmentation_percent()
    )?;
    writeln!(
        out,
        "<rect x=\"{LEFT:.1}\" y=\"{plot_top:.1}\" width=\"{plot_width:.1}\" height=\"{PLOT_HEIGHT:.1}\" fill=\"#f7f7f7\" stroke=\"#444\"/>"
    )?;
    // The band between the lower bound and the arena size is what the plan spends above the
    // best possible: tinted so that waste stands out.
    let bound = y(region.lower_bound);
    let ceiling = y(region.size);
    if bound > ceiling {
        writeln!(
            out,
            "<rect x=\"{LEFT:.1}\" y=\"{ceiling:.2}\" width=\"{plot_width:.1}\" height=\"{:.2}\" fill=\"#fbe3e3\"><title>above the lower bound: {} bytes</title></rect>",
            bound - ceiling,
            region.fragmentation()
        )?;
    }
    let drawn = drawn_tensors(plan, region, drawn_limit);
    let aggregated = write_aggregated(out, plan, region, &drawn, plot_top, steps, scale_max)?;
    for &index in &drawn {
        let tensor = &plan.tensors[index];
        let left = x(f64::from(tensor.lifetime.first));
        let right = x(f64::from(tensor.lifetime.last) + 1.0);
        let upper = y(tensor.offset.saturating_add(tensor.size));
        let lower = y(tensor.offset);
        // Hues spread by the golden angle so that neighbours differ; fixed by the tensor index.
        let fill = hex_colour((index as u64 * 137) % 360, 0.55, 0.65);
        let name = if tensor.name == tensor.id {
            xml(&tensor.id)
        } else {
            format!("{} (id {})", xml(&tensor.name), xml(&tensor.id))
        };
        writeln!(
            out,
            "<rect x=\"{left:.2}\" y=\"{upper:.2}\" width=\"{:.2}\" height=\"{:.2}\" fill=\"{fill}\" stroke=\"#333\" stroke-width=\"0.5\"><title>{name}: {} bytes @ offset {}, steps {}-{}, {}</title></rect>",
            (right - left).max(0.5),
            (lower - upper).max(0.5),
            tensor.size,
            tensor.offset,
            tensor.lifetime.first,
            tensor.lifetime.last,
            tensor.kind.as_str()
        )?;
        // Label the rectangle when there is room for a few characters (about 7 px each):
        // across it, or up along it when it is tall and narrow (one op step of a long model).
        let (width, height) = (right - left, lower - upper);
        let across = ((width - 6.0) / 7.0).floor();
        let along = ((height - 6.0) / 7.0).floor();
        let label = label_of(&tensor.id, &tensor.name);
        if height >= 14.0 && (across >= label.chars().count() as f64 || across >= along) {
            if across >= 4.0 {
                let label: String = label.chars().take(across as usize).collect();
                writeln!(
                    out,
                    "<text x=\"{:.2}\" y=\"{:.2}\" font-size=\"11\" pointer-events=\"none\">{}</text>",
                    left + 3.0,
                    upper + 12.0,
                    xml(&label)
                )?;
            }
        } else if width >= 14.0 && along >= 4.0 {
            let label: String = label.chars().take(along as usize).collect();
            let (x, y) = (left + 11.0, lower - 3.0);
            writeln!(
                out,
                "<text x=\"{x:.2}\" y=\"{y:.2}\" transform=\"rotate(-90 {x:.2} {y:.2})\" font-size=\"11\" pointer-events=\"none\">{}</text>",
                xml(&label)
            )?;
        }
    }
    if aggregated > 0 {
        writeln!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" fill=\"#666\">{} of {} tensors drawn one by one; the other {aggregated} in gray, darker where more of a cell's bytes x steps are in use</text>",
            LEFT,
            bottom + 30.0,
            drawn.len(),
            drawn.len() + aggregated
        )?;
    }
    writeln!(
        out,
        "<line x1=\"{LEFT:.1}\" y1=\"{bound:.2}\" x2=\"{:.1}\" y2=\"{bound:.2}\" stroke=\"#c00\" stroke-width=\"1.5\" stroke-dasharray=\"6 4\"><title>lower bound: {} bytes</title></line>",
        LEFT + plot_width,
        region.lower_bound
    )?;
    writeln!(
        out,
        "<text x=\"{:.1}\" y=\"{:.2}\" fill=\"#c00\" text-anchor=\"end\">lower bound</text>",
        LEFT + plot_width - 4.0,
        bound - 4.0
    )?;
    // Offset axis: 0 and the arena size; step axis: first and last step.
    writeln!(
        out,
        "<text x=\"{:.1}\" y=\"{bottom:.1}\" text-anchor=\"end\">0</text>",
        LEFT - 6.0
    )?;
    writeln!(
        out,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
        LEFT - 6.0,
        y(region.size) + 10.0,
        region.size
    )?;
    writeln!(
        out,
        "<text x=\"{LEFT:.1}\" y=\"{:.1}\">step 0</text>",
        bottom + 16.0
    )?;
    writeln!(
        out,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">step {}</text>",
        LEFT + plot_width,
        bottom + 16.0,
        plan.num_steps.saturating_sub(1)
    )?;
    writeln!(
        out,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#666\">x: op step, y: byte offset</text>",
        LEFT + plot_width / 2.0,
        bottom + 16.0
    )?;
    writeln!(out, "</g>")
}

/// Draws the tensors of `region` not in `drawn` as a grid of gray cells (see the module
/// docs); returns how many tensors it aggregated.
fn write_aggregated(
    out: &mut dyn Write,
    plan: &RenderPlan,
    region: &Region,
    drawn: &[usize],
    plot_top: f64,
    steps: f64,
    scale_max: f64,
) -> Result<usize, fmt::Error> {
    let plot_width = WIDTH - LEFT - RIGHT;
    let columns = (plot_width / CELL) as usize;
    let rows = (PLOT_HEIGHT / CELL) as usize;
    let mut is_drawn = vec![false; plan.tensors.len()];
    for &index in drawn {
        is_drawn[index] = true;
    }
    // Per row, a difference array over columns of the share of the cell's height covered:
    // each tensor costs one update per row it touches.
    let mut coverage = vec![0f32; rows * (columns + 1)];
    let mut aggregated = 0;
    let bytes_per_row = scale_max / rows as f64;
    let steps_per_column = steps / columns as f64;
    // In tensor order, not the region's (by offset): a sequential scan, where a million
    // lookups in offset order would each miss the cache.
    for (index, tensor) in plan.tensors.iter().enumerate() {
        if tensor.region != Some(region.id)
            || is_drawn[index]
            || tensor.alias_of.is_some()
            || tensor.size == 0
        {
            continue;
        }
        aggregated += 1;
        let first_column = (f64::from(tensor.lifetime.first) / steps_per_column) as usize;
        let end_column = ((f64::from(tensor.lifetime.last) + 1.0) / steps_per_column)
            .ceil()
            .clamp(first_column as f64 + 1.0, columns as f64) as usize;
        let first_column = first_column.min(columns - 1);
        // Share of each column's steps the tensor covers, so that a short lifetime in a wide
        // cell counts little.
        let width_share = ((f64::from(tensor.lifetime.last - tensor.lifetime.first) + 1.0)
            / (steps_per_column * (end_column - first_column) as f64))
            .min(1.0);
        let (low, high) = (
            tensor.offset as f64 / bytes_per_row,
            tensor.offset.saturating_add(tensor.size) as f64 / bytes_per_row,
        );
        let last_row = (high.ceil() as usize).min(rows);
        for row in (low as usize).min(rows)..last_row {
            let covered = (high.min(row as f64 + 1.0) - low.max(row as f64)).max(0.0);
            let share = (covered * width_share) as f32;
            let line = &mut coverage[row * (columns + 1)..(row + 1) * (columns + 1)];
            line[first_column] += share;
            line[end_column] -= share;
        }
    }
    if aggregated == 0 {
        return Ok(0);
    }
    let bottom = plot_top + PLOT_HEIGHT;
    for row in 0..rows {
        let line = &coverage[row * (columns + 1)..(row + 1) * (columns + 1)];
        let mut running = 0f32;
        let mut run: Option<(usize, u32)> = None;
        let y = bottom - CELL * (row + 1) as f64;
        let flush = |out: &mut dyn Write, start: usize, end: usize, shade: u32| {
            if shade == 0 {
                return Ok(());
            }
            let lightness = 85 - shade * 50 / SHADES;
            let fill = hex_colour(0, 0.0, f64::from(lightness) / 100.0);
            writeln!(
                out,
                "<rect x=\"{:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{CELL}\" fill=\"{fill}\"/>",
                LEFT + CELL * start as f64,
                CELL * (end - start) as f64
            )
        };
        for (column, &delta) in line.iter().take(columns).enumerate() {
            running += delta;
            let shade = ((running.clamp(0.0, 1.0) * SHADES as f32).ceil() as u32).min(SHADES);
            match run {
                Some((_, current)) if current == shade => {}
                Some((start, current)) => {
                    flush(out, start, column, current)?;
                    run = Some((column, shade));
                }
                None => run = Some((column, shade)),
            }
        }
        if let Some((start, shade)) = run {
            flush(out, start, columns, shade)?;
        }
    }
    Ok(aggregated)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_name_the_tensor_by_id_and_the_end_of_its_name() {
        assert_eq!(label_of("7", "7"), "7");
        assert_eq!(
            label_of("12", "MobilenetV1/MobilenetV1/Conv2d_1_depthwise/Relu6"),
            "12 Conv2d_1_depthwise/Relu6"
        );
        assert_eq!(
            label_of(
                "58",
                "model/activation/Relu;model/batch_normalization/FusedBatchNormV3"
            ),
            "58 activation/Relu"
        );
    }

    /// One scratch region of `count` tensors, each 64 bytes for 2 steps, stacked in 8 rows.
    fn many_tensors(count: usize) -> RenderPlan {
        use crate::render::RenderedTensor;
        use memplan_plugin_api::{ArenaRole, Lifetime, TensorKind};
        let tensors: Vec<RenderedTensor> = (0..count)
            .map(|index| RenderedTensor {
                id: index.to_string(),
                name: index.to_string(),
                c_name: format!("m_tensor_{index}"),
                kind: TensorKind::Intermediate,
                role: ArenaRole::Scratch,
                memory: "SRAM".into(),
                source_memory: "SRAM".into(),
                region: Some(0),
                offset: 64 * (index % 8) as u64,
                size: 64,
                alignment: 16,
                lifetime: Lifetime::new((index / 8) as u32 * 2, (index / 8) as u32 * 2 + 1),
                alias_of: None,
                external: false,
            })
            .collect();
        let region = Region {
            id: 0,
            role: ArenaRole::Scratch,
            memory: "SRAM".into(),
            source_memory: "SRAM".into(),
            size: 512,
            alignment: 16,
            lower_bound: 512,
            used: 512,
            budget: None,
            c_name: "m_arena_sram".into(),
            tensors: (0..count).collect(),
            payload: None,
        };
        RenderPlan {
            prefix: "m".into(),
            external_arenas: false,
            num_steps: (count / 8 * 2 + 2) as u32,
            regions: vec![region],
            tensors,
            inputs: Vec::new(),
            outputs: Vec::new(),
            plan_hash: "0".into(),
            tensor_layout_hash: "0".into(),
            plan_document: String::new(),
            tflite: None,
            emit_tflite: false,
            order: None,
        }
    }

    #[test]
    fn a_large_plan_draws_a_bounded_number_of_tensors_and_aggregates_the_rest() {
        let small = layout_svg(&many_tensors(800)).unwrap();
        assert_eq!(
            small.matches(" bytes @ offset ").count(),
            800,
            "all drawn, with tooltips"
        );
        assert!(!small.contains("drawn one by one"));

        let large = layout_svg(&many_tensors(200_000)).unwrap();
        let tooltips = large.matches(" bytes @ offset ").count();
        assert_eq!(tooltips, MAX_DRAWN);
        assert!(
            large.contains(&format!(
                "{MAX_DRAWN} of 200000 tensors drawn one by one; the other {} in gray",
                200_000 - MAX_DRAWN
            )),
            "{}",
            &large[large.len() - 600..]
        );
        // Every byte of the arena is in use at every step: the cells are all darkest, merged
        // into one rectangle per row.
        assert!(large.contains("fill=\"#595959\""));
        assert!(large.len() < 10 << 20, "{} bytes", large.len());
    }

    #[test]
    fn colours_are_hex_as_svg_1_1_writes_them() {
        // CSS hsl() values: red, green, blue, a grey, and two tensor tints (55 %, 65 %), as
        // Python's colorsys.hls_to_rgb gives them.
        assert_eq!(hex_colour(0, 1.0, 0.5), "#ff0000");
        assert_eq!(hex_colour(120, 1.0, 0.5), "#00ff00");
        assert_eq!(hex_colour(240, 1.0, 0.5), "#0000ff");
        assert_eq!(hex_colour(0, 0.0, 0.35), "#595959");
        assert_eq!(hex_colour(137, 0.55, 0.65), "#75d790");
        assert_eq!(hex_colour(359, 0.55, 0.65), "#d77576");
    }

    #[test]
    fn xml_escapes_markup_and_control_characters() {
        assert_eq!(xml("a<b>&\"c'\n"), "a&lt;b&gt;&amp;&quot;c&apos; ");
    }
}

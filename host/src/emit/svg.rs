//! `{prefix}_layout.svg`: a picture of the plan, one panel per region.
//!
//! In a panel, x is the op step and y the byte offset (0 at the bottom); each tensor with
//! bytes of its own is a rectangle spanning its lifetime and its bytes, with a tooltip
//! (name, id, size, offset, lifetime) and, where it fits, its name. The dashed line is the
//! arena's lower bound; the tinted band between it and the top of the panel (the arena size)
//! is what the plan spends above the best possible. Aliases are not drawn (their bytes are
//! their root's).

use std::fmt::{self, Write};

use crate::render::{Region, RenderPlan};

const WIDTH: f64 = 960.0;
const LEFT: f64 = 90.0;
const RIGHT: f64 = 20.0;
const PANEL_TITLE: f64 = 34.0;
const PLOT_HEIGHT: f64 = 220.0;
const AXIS: f64 = 36.0;
const PANEL_HEIGHT: f64 = PANEL_TITLE + PLOT_HEIGHT + AXIS;

/// `text` escaped for XML character data and attribute values.
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

pub fn layout_svg(plan: &RenderPlan) -> Result<String, fmt::Error> {
    let height = 40.0 + PANEL_HEIGHT * plan.regions.len().max(1) as f64;
    let mut out = String::new();
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
    for region in &plan.regions {
        let top = 40.0 + PANEL_HEIGHT * region.id as f64;
        write_panel(&mut out, plan, region, top)?;
    }
    writeln!(out, "</svg>")?;
    Ok(out)
}

fn write_panel(out: &mut String, plan: &RenderPlan, region: &Region, top: f64) -> fmt::Result {
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
    for &index in &region.tensors {
        let tensor = &plan.tensors[index];
        if tensor.alias_of.is_some() {
            continue;
        }
        let left = x(f64::from(tensor.lifetime.first));
        let right = x(f64::from(tensor.lifetime.last) + 1.0);
        let upper = y(tensor.offset.saturating_add(tensor.size));
        let lower = y(tensor.offset);
        // Hues spread by the golden angle so that neighbours differ; fixed by the tensor index.
        let hue = (index as u64 * 137) % 360;
        let name = if tensor.name == tensor.id {
            xml(&tensor.id)
        } else {
            format!("{} (id {})", xml(&tensor.name), xml(&tensor.id))
        };
        writeln!(
            out,
            "<rect x=\"{left:.2}\" y=\"{upper:.2}\" width=\"{:.2}\" height=\"{:.2}\" fill=\"hsl({hue},55%,65%)\" stroke=\"#333\" stroke-width=\"0.5\"><title>{name}: {} bytes @ offset {}, steps {}-{}, {}</title></rect>",
            (right - left).max(0.5),
            (lower - upper).max(0.5),
            tensor.size,
            tensor.offset,
            tensor.lifetime.first,
            tensor.lifetime.last,
            tensor.kind.as_str()
        )?;
        // Name the rectangle when there is room for a few characters (about 7 px each).
        let room = ((right - left - 6.0) / 7.0).floor();
        if lower - upper >= 14.0 && room >= 4.0 {
            let label: String = tensor.name.chars().take(room as usize).collect();
            writeln!(
                out,
                "<text x=\"{:.2}\" y=\"{:.2}\" font-size=\"11\" pointer-events=\"none\">{}</text>",
                left + 3.0,
                upper + 12.0,
                xml(&label)
            )?;
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xml_escapes_markup_and_control_characters() {
        assert_eq!(xml("a<b>&\"c'\n"), "a&lt;b&gt;&amp;&quot;c&apos; ");
    }
}

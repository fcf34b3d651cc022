//! A plain table that renders aligned for the terminal or as GitHub markdown.

/// Column alignment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Align {
    /// Text columns.
    Left,
    /// Number columns.
    Right,
}

/// Headers plus rows of already-formatted cells.
#[derive(Clone, Debug)]
pub struct Table {
    headers: Vec<String>,
    align: Vec<Align>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these headers; the first column is left-aligned, the rest right-aligned.
    pub fn new(headers: &[&str]) -> Self {
        let align = (0..headers.len())
            .map(|i| if i == 0 { Align::Left } else { Align::Right })
            .collect();
        Table {
            headers: headers.iter().map(|s| s.to_string()).collect(),
            align,
            rows: vec![],
        }
    }

    /// Overrides the alignment of every column.
    pub(crate) fn with_align(mut self, align: &[Align]) -> Self {
        assert_eq!(align.len(), self.headers.len());
        self.align = align.to_vec();
        self
    }

    /// Appends a row; it must have one cell per header.
    pub fn row(&mut self, cells: Vec<String>) {
        assert_eq!(
            cells.len(),
            self.headers.len(),
            "row width differs from header width"
        );
        self.rows.push(cells);
    }

    /// Whether the table has no rows.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    fn widths(&self) -> Vec<usize> {
        let mut w: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, c) in row.iter().enumerate() {
                w[i] = w[i].max(c.chars().count());
            }
        }
        w
    }

    fn pad(cell: &str, width: usize, align: Align) -> String {
        let fill = " ".repeat(width.saturating_sub(cell.chars().count()));
        match align {
            Align::Left => format!("{cell}{fill}"),
            Align::Right => format!("{fill}{cell}"),
        }
    }

    /// Renders for a terminal: aligned columns, a dashed rule under the header.
    pub fn render(&self) -> String {
        let w = self.widths();
        let line = |cells: &[String]| {
            let padded: Vec<String> = cells
                .iter()
                .enumerate()
                .map(|(i, c)| Self::pad(c, w[i], self.align[i]))
                .collect();
            padded.join("  ").trim_end().to_string()
        };
        let mut out = vec![line(&self.headers)];
        out.push(
            w.iter()
                .map(|n| "-".repeat(*n))
                .collect::<Vec<_>>()
                .join("  "),
        );
        out.extend(self.rows.iter().map(|r| line(r)));
        out.join("\n") + "\n"
    }

    /// Renders as a GitHub-flavoured markdown table.
    pub(crate) fn render_markdown(&self) -> String {
        let esc = |s: &str| s.replace('|', "\\|");
        let mut out = format!(
            "| {} |\n",
            self.headers
                .iter()
                .map(|h| esc(h))
                .collect::<Vec<_>>()
                .join(" | ")
        );
        let rule: Vec<&str> = self
            .align
            .iter()
            .map(|a| if *a == Align::Left { ":---" } else { "---:" })
            .collect();
        out += &format!("| {} |\n", rule.join(" | "));
        for row in &self.rows {
            out += &format!(
                "| {} |\n",
                row.iter().map(|c| esc(c)).collect::<Vec<_>>().join(" | ")
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligns_columns_and_renders_markdown() {
        let mut t = Table::new(&["name", "count"]);
        t.row(vec!["Conv".into(), "53".into()]);
        t.row(vec!["Relu|x".into(), "7".into()]);
        assert_eq!(
            t.render(),
            "name    count\n------  -----\nConv       53\nRelu|x      7\n"
        );
        assert_eq!(
            t.render_markdown(),
            "| name | count |\n| :--- | ---: |\n| Conv | 53 |\n| Relu\\|x | 7 |\n"
        );
    }
}

//! A greedy minimiser in proptest's spirit: keep any smaller input that still fails the same
//! way, and repeat until no pass makes progress or the tries run out. The passes, from
//! coarse to fine: drop whole tables (`[x]` with its lines), drop runs of lines (halves, then
//! quarters, ... then single lines), drop the comma-separated parts of a line (a step's keys,
//! an array's items), drop trailing comments, and shrink each number (to 0, to 1, halved).

/// The smallest input found that `still_fails` accepts, trying at most `tries` candidates.
/// `input` itself must fail.
pub fn minimise(input: &str, still_fails: &mut dyn FnMut(&str) -> bool, tries: usize) -> String {
    let mut minimiser = Minimiser {
        best: input.to_owned(),
        still_fails,
        tries_left: tries,
    };
    loop {
        let before = minimiser.best.clone();
        minimiser.tables();
        minimiser.line_runs();
        minimiser.line_parts();
        minimiser.comments();
        minimiser.numbers();
        // Every pass only shrinks (fewer bytes, or smaller numbers), so this ends.
        if minimiser.best == before || minimiser.tries_left == 0 {
            return minimiser.best;
        }
    }
}

struct Minimiser<'a> {
    best: String,
    still_fails: &'a mut dyn FnMut(&str) -> bool,
    tries_left: usize,
}

impl Minimiser<'_> {
    /// Keeps `candidate` if it is shorter and still fails.
    fn try_candidate(&mut self, candidate: String) -> bool {
        if candidate.len() >= self.best.len() {
            return false;
        }
        self.try_smaller(candidate)
    }

    /// Keeps `candidate`, which the caller knows to be smaller (a number shrunk in place),
    /// if it still fails.
    fn try_smaller(&mut self, candidate: String) -> bool {
        if self.tries_left == 0 || candidate == self.best {
            return false;
        }
        self.tries_left -= 1;
        if (self.still_fails)(&candidate) {
            self.best = candidate;
            true
        } else {
            false
        }
    }

    fn lines(&self) -> Vec<String> {
        self.best.lines().map(str::to_owned).collect()
    }

    fn tables(&mut self) {
        let lines = self.lines();
        let starts: Vec<usize> = lines
            .iter()
            .enumerate()
            .filter(|(_, line)| line.trim_start().starts_with('['))
            .map(|(index, _)| index)
            .collect();
        // From the last table back, so earlier indices stay valid after a removal.
        for (position, &start) in starts.iter().enumerate().rev() {
            let end = starts.get(position + 1).copied().unwrap_or(lines.len());
            let lines = self.lines();
            if end > lines.len() {
                continue;
            }
            let candidate = join(lines[..start].iter().chain(&lines[end..]));
            self.try_candidate(candidate);
        }
    }

    fn line_runs(&mut self) {
        let mut size = (self.lines().len() / 2).max(1);
        loop {
            let mut start = 0;
            while start < self.lines().len() {
                let lines = self.lines();
                let end = (start + size).min(lines.len());
                let candidate = join(lines[..start].iter().chain(&lines[end..]));
                if !self.try_candidate(candidate) {
                    start += size;
                }
            }
            if size == 1 {
                return;
            }
            size /= 2;
        }
    }

    fn line_parts(&mut self) {
        let mut index = 0;
        while index < self.lines().len() {
            let mut part = 1;
            loop {
                let lines = self.lines();
                let parts: Vec<&str> = lines[index].split(", ").collect();
                if part >= parts.len() {
                    break;
                }
                let kept: Vec<&str> = parts
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| *i != part)
                    .map(|(_, p)| *p)
                    .collect();
                let mut lines = lines.clone();
                lines[index] = kept.join(", ");
                if !self.try_candidate(join(lines.iter())) {
                    part += 1;
                }
            }
            index += 1;
        }
    }

    /// Drops each line's trailing comment.
    fn comments(&mut self) {
        for index in 0..self.lines().len() {
            let mut lines = self.lines();
            let Some(hash) = lines.get(index).and_then(|line| line.find(" #")) else {
                continue;
            };
            lines[index].truncate(hash);
            let trimmed = lines[index].trim_end().len();
            lines[index].truncate(trimmed);
            self.try_candidate(join(lines.iter()));
        }
    }

    fn numbers(&mut self) {
        let mut at = 0;
        while at < self.best.len() {
            let bytes = self.best.as_bytes();
            if !bytes[at].is_ascii_digit() || (at > 0 && bytes[at - 1].is_ascii_alphanumeric()) {
                at += 1;
                continue;
            }
            let end = at
                + bytes[at..]
                    .iter()
                    .take_while(|b| b.is_ascii_digit())
                    .count();
            let Ok(value) = self.best[at..end].parse::<u128>() else {
                at = end;
                continue;
            };
            for smaller in [0, 1, value / 2] {
                if smaller >= value {
                    continue;
                }
                let candidate = format!("{}{smaller}{}", &self.best[..at], &self.best[end..]);
                if self.try_smaller(candidate) {
                    break;
                }
            }
            at += 1;
        }
    }
}

fn join<'a>(lines: impl Iterator<Item = &'a String>) -> String {
    let mut text = String::new();
    for line in lines {
        text.push_str(line);
        text.push('\n');
    }
    text
}

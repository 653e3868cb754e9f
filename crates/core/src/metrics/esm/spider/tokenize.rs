//! process_sql.py's `tokenize`, over an approximation of `nltk.word_tokenize` (the Treebank
//! rules that matter once quoted literals are replaced).

use std::collections::HashMap;

use super::{PResult, perr};

/// process_sql.tokenize: quoted literals kept verbatim (single quotes made double), everything
/// else lowercased and split like `nltk.word_tokenize`, then `! =`, `> =`, `< =` merged.
pub fn tokenize(sql: &str) -> PResult<Vec<String>> {
    let string: String = sql.replace('\'', "\"");
    let quote_idxs: Vec<usize> = string
        .char_indices()
        .filter(|(_, c)| *c == '"')
        .map(|(i, _)| i)
        .collect();
    if !quote_idxs.len().is_multiple_of(2) {
        return perr("Unexpected quote");
    }
    // Replace each quoted literal (consecutive quote pairs) by a placeholder key, in one pass.
    let mut vals: HashMap<String, String> = HashMap::new();
    let mut s = String::with_capacity(string.len() + quote_idxs.len() * 8);
    let mut cursor = 0usize;
    for pair in quote_idxs.chunks_exact(2) {
        let (q1, q2) = (pair[0], pair[1]);
        let key = format!("__val_{q1}_{q2}__");
        s.push_str(string.get(cursor..q1).unwrap_or_default());
        s.push_str(&key);
        vals.insert(key, string.get(q1..=q2).unwrap_or_default().to_string());
        cursor = q2 + 1;
    }
    s.push_str(string.get(cursor..).unwrap_or_default());
    let mut toks: Vec<String> = word_tokenize(&s)
        .into_iter()
        .map(|t| {
            let lower = t.to_lowercase();
            match vals.get(&lower) {
                Some(v) => v.clone(),
                None => lower,
            }
        })
        .collect();
    // Merge "!", ">", "<" followed by "=" (right to left, as the script does).
    let eq_idxs: Vec<usize> = toks
        .iter()
        .enumerate()
        .filter(|(_, t)| t.as_str() == "=")
        .map(|(i, _)| i)
        .rev()
        .collect();
    for eq in eq_idxs {
        if eq == 0 {
            continue;
        }
        let pre = toks.get(eq - 1).cloned().unwrap_or_default();
        if pre == "!" || pre == ">" || pre == "<" {
            let mut merged: Vec<String> = toks[..eq - 1].to_vec();
            merged.push(format!("{pre}="));
            merged.extend_from_slice(toks.get(eq + 1..).unwrap_or_default());
            toks = merged;
        }
    }
    Ok(toks)
}

/// The parts of NLTK's Treebank word tokenizer that matter once quotes are gone.
fn word_tokenize(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len() * 2);
    let n = chars.len();
    // Final period (Treebank: `([^\.])(\.)([\]\)}>"\']*)\s*$`).
    let mut final_period: Option<usize> = None;
    {
        let mut end = n;
        while end > 0 && chars[end - 1].is_whitespace() {
            end -= 1;
        }
        let mut j = end;
        while j > 0 && matches!(chars[j - 1], ']' | ')' | '}' | '>' | '"' | '\'') {
            j -= 1;
        }
        if j >= 2 && chars[j - 1] == '.' && chars[j - 2] != '.' {
            final_period = Some(j - 1);
        }
    }
    let mut k = 0;
    while k < n {
        let c = chars[k];
        match c {
            ',' | ':' => {
                // ([:,])([^\d]) -> " \1 \2" and ([:,])$ -> " \1 "
                let next = chars.get(k + 1);
                if next.is_none_or(|d| !d.is_ascii_digit()) {
                    out.push(' ');
                    out.push(c);
                    out.push(' ');
                } else {
                    out.push(c);
                }
            }
            ';' | '@' | '#' | '$' | '%' | '&' | '?' | '!' | '*' => {
                out.push(' ');
                out.push(c);
                out.push(' ');
            }
            '[' | ']' | '(' | ')' | '{' | '}' | '<' | '>' => {
                out.push(' ');
                out.push(c);
                out.push(' ');
            }
            '-' if chars.get(k + 1) == Some(&'-') => {
                out.push_str(" -- ");
                k += 1;
            }
            '.' if Some(k) == final_period => {
                out.push(' ');
                out.push('.');
                out.push(' ');
            }
            '.' if chars.get(k + 1) == Some(&'.') => {
                // \.{2,}
                let mut m = k;
                while m < n && chars[m] == '.' {
                    m += 1;
                }
                out.push(' ');
                for _ in k..m {
                    out.push('.');
                }
                out.push(' ');
                k = m;
                continue;
            }
            _ => out.push(c),
        }
        k += 1;
    }
    out.split_whitespace().map(str::to_string).collect()
}

//! Operations on the parsed TOML tree (with spans) before it is deserialised: taking out the
//! `[[variant]]` and `[sweep]` entries, merging a variant's patch into the base, and setting a
//! swept parameter. Every value keeps the span it had in the file, so an error in a merged
//! document still points at the line that wrote the value.

use std::ops::Range;

use serde::Deserialize;
use toml::Spanned;
use toml::de::{DeString, DeTable, DeValue};

pub type Table<'a> = DeTable<'a>;
pub type Value<'a> = Spanned<DeValue<'a>>;

/// Removes `key` from the root table.
pub fn take<'a>(root: &mut Table<'a>, key: &str) -> Option<(Range<usize>, Value<'a>)> {
    root.remove_entry(key)
        .map(|(key, value)| (key.span(), value))
}

/// Merges `patch` into `base`: tables merge key by key, recursively; a table whose keys are
/// element numbers (`[variant.patch.flows.read.steps.0]`) merges into those elements of an
/// array; any other value (a number, a string, an array) replaces what was there. Returns the
/// span and reason of a patch that names an element the array does not have.
pub fn merge<'a>(base: &mut Table<'a>, patch: &Table<'a>) -> Result<(), (Range<usize>, String)> {
    for (key, value) in patch.iter() {
        match (base.get_mut(key.get_ref().as_ref()), value.get_ref()) {
            (Some(existing), DeValue::Table(patch_table)) => match existing.get_mut() {
                DeValue::Table(base_table) => merge(base_table, patch_table)?,
                DeValue::Array(items) => merge_elements(items, patch_table)?,
                _ => *existing = value.clone(),
            },
            _ => {
                base.insert(key.clone(), value.clone());
            }
        }
    }
    Ok(())
}

/// Merges a patch keyed by element number into the elements of an array.
fn merge_elements<'a>(
    items: &mut [Value<'a>],
    patch: &Table<'a>,
) -> Result<(), (Range<usize>, String)> {
    let count = items.len();
    for (key, value) in patch.iter() {
        let index = key
            .get_ref()
            .parse::<usize>()
            .ok()
            .filter(|&index| index < count)
            .ok_or_else(|| {
                let reason = format!(
                    "`{}` is not an element of this array of {count}: patch an element by its \
                     number, from 0",
                    key.get_ref()
                );
                (key.span(), reason)
            })?;
        match (items[index].get_mut(), value.get_ref()) {
            (DeValue::Table(item), DeValue::Table(item_patch)) => merge(item, item_patch)?,
            _ => items[index] = value.clone(),
        }
    }
    Ok(())
}

/// Moves every span in `value` `by` bytes later: a value parsed from a text of its own (a
/// `--set` flag's) is placed past the end of the file, so that its spans say where it came from.
pub fn shift(value: &mut Value<'_>, by: usize) {
    let moved = |span: Range<usize>| span.start + by..span.end + by;
    let span = moved(value.span());
    let mut inner = std::mem::replace(value.get_mut(), DeValue::Boolean(false));
    match &mut inner {
        DeValue::Array(items) => items.iter_mut().for_each(|item| shift(item, by)),
        DeValue::Table(table) => {
            let entries = std::mem::replace(table, Table::new());
            *table = entries
                .into_iter()
                .map(|(key, mut item)| {
                    shift(&mut item, by);
                    (Spanned::new(moved(key.span()), key.into_inner()), item)
                })
                .collect();
        }
        _ => {}
    }
    *value = Spanned::new(span, inner);
}

/// The top-level tables whose every key has a default (`[run]`, `[metrics]`): `set_path`
/// creates them when the file leaves them out.
pub const DEFAULTED_TABLES: [&str; 2] = ["run", "metrics"];

/// Sets the value at a dotted `path` (every part but the last must be an existing table, or
/// one of `DEFAULTED_TABLES`, made when missing; a missing one is named, with the nearest name
/// there is when it looks like a typo). A list of tables is entered by an element's index,
/// as a variant's patch and `[explore.params]` address it: `flows.read.steps.0.on_error`,
/// or `flows.read.steps.0` for the whole step.
pub fn set_path<'a>(
    root: &mut Table<'a>,
    path: &str,
    path_span: Range<usize>,
    value: Value<'a>,
) -> Result<(), String> {
    let parts: Vec<&str> = path.split('.').collect();
    let (last, parents) = parts.split_last().expect("split yields at least one part");
    let mut table = root;
    let mut depth = 0;
    // Bound: each turn takes one part of the path (two for a list and its index).
    while depth < parents.len() {
        let part = &parents[depth];
        let seen = parts[..=depth].join(".");
        if depth == 0 && DEFAULTED_TABLES.contains(part) && !table.contains_key(*part) {
            // Every key of these tables has a default, so a file may leave them out and
            // `--set run.memory_max=...` still means something: the table is made empty.
            let key = Spanned::new(path_span.clone(), DeString::from(part.to_string()));
            let empty = Spanned::new(path_span.clone(), DeValue::Table(Table::new()));
            table.insert(key, empty);
        }
        if !table.contains_key(*part) {
            let known = table.iter().map(|(key, _)| key.get_ref().as_ref());
            let hint = crate::suggest::closest(part, known)
                .map(|near| {
                    let mut near_path = parts[..depth].to_vec();
                    near_path.push(near);
                    format!(": did you mean `{}`?", near_path.join("."))
                })
                .unwrap_or_default();
            return Err(format!(
                "the scenario has no `{seen}`, so `{path}` cannot be set{hint}"
            ));
        }
        table = match table.get_mut(*part).map(Spanned::get_mut) {
            Some(DeValue::Table(inner)) => inner,
            Some(DeValue::Array(items)) => {
                let index_part = parts[depth + 1];
                let item = element(items, index_part, &seen, path)?;
                if depth + 1 == parents.len() {
                    *item = value;
                    return Ok(());
                }
                depth += 1;
                match item.get_mut() {
                    DeValue::Table(inner) => inner,
                    _ => {
                        return Err(format!(
                            "`{seen}.{index_part}` is not a table, so `{path}` cannot be set"
                        ));
                    }
                }
            }
            _ => {
                return Err(format!(
                    "`{seen}` is not a table, so `{path}` cannot be set"
                ));
            }
        };
        depth += 1;
    }
    let key = Spanned::new(path_span, DeString::from(last.to_string()));
    table.insert(key, value);
    Ok(())
}

/// The element of list `seen` that `index` names (`0`, `1`, ...), or why there is none.
fn element<'v, 'a>(
    items: &'v mut [Value<'a>],
    index: &str,
    seen: &str,
    path: &str,
) -> Result<&'v mut Value<'a>, String> {
    let count = items.len();
    let Ok(at) = index.parse::<usize>() else {
        return Err(format!(
            "`{seen}` is a list: name an element by its index (`{seen}.0`), so `{path}` \
             cannot be set"
        ));
    };
    items
        .get_mut(at)
        .ok_or_else(|| format!("`{seen}` has {count} elements (from 0), so `{path}` cannot be set"))
}

/// Every value of a document by its dotted path (`flows.read.steps.0.on_error`), written as
/// TOML writes it (`"next"`, `100`, `[1, 2]`), in sorted order: what a variant's settings are,
/// so that two variants can be compared key by key. Arrays of tables are walked element by
/// element; any other array is one value, and an empty table is `{}`.
pub fn flatten(root: &Table<'_>) -> std::collections::BTreeMap<String, String> {
    fn walk(
        prefix: &str,
        value: &DeValue<'_>,
        out: &mut std::collections::BTreeMap<String, String>,
    ) {
        let child = |key: &str| {
            if prefix.is_empty() {
                key.to_owned()
            } else {
                format!("{prefix}.{key}")
            }
        };
        match value {
            // An empty table still declares something (`[servers.redis]` with every default).
            DeValue::Table(table) if table.is_empty() => {
                out.insert(prefix.to_owned(), "{}".to_owned());
            }
            DeValue::Table(table) => {
                for (key, value) in table.iter() {
                    walk(&child(key.get_ref()), value.get_ref(), out);
                }
            }
            DeValue::Array(items)
                if !items.is_empty() && items.iter().all(|i| i.get_ref().is_table()) =>
            {
                for (index, item) in items.iter().enumerate() {
                    walk(&child(&index.to_string()), item.get_ref(), out);
                }
            }
            scalar => {
                out.insert(prefix.to_owned(), inline(scalar));
            }
        }
    }
    let mut out = std::collections::BTreeMap::new();
    for (key, value) in root.iter() {
        walk(key.get_ref(), value.get_ref(), &mut out);
    }
    out
}

/// A value as TOML writes it on one line.
fn inline(value: &DeValue<'_>) -> String {
    match value {
        DeValue::String(text) => format!("{:?}", text.as_ref()),
        DeValue::Integer(integer) => integer.to_string(),
        DeValue::Float(float) => float.to_string(),
        DeValue::Boolean(boolean) => boolean.to_string(),
        DeValue::Datetime(datetime) => datetime.to_string(),
        DeValue::Array(items) => {
            let items: Vec<String> = items.iter().map(|i| inline(i.get_ref())).collect();
            format!("[{}]", items.join(", "))
        }
        DeValue::Table(table) => {
            let entries: Vec<String> = table
                .iter()
                .map(|(key, value)| format!("{} = {}", key.get_ref(), inline(value.get_ref())))
                .collect();
            format!("{{ {} }}", entries.join(", "))
        }
    }
}

/// Span of the key at `path` (every part but the last a table), if the document has it.
pub fn key_span(root: &Table<'_>, path: &[&str]) -> Option<Range<usize>> {
    let (last, parents) = path.split_last()?;
    let mut table = root;
    for part in parents {
        match table.get(*part).map(Spanned::get_ref) {
            Some(DeValue::Table(inner)) => table = inner,
            _ => return None,
        }
    }
    table.get_key_value(*last).map(|(key, _)| key.span())
}

/// Deserialises a table (with its spans) into `T`.
pub fn deserialize_table<'a, T: Deserialize<'a>>(
    table: Table<'a>,
    span: Range<usize>,
) -> Result<T, toml::de::Error> {
    T::deserialize(toml::de::Deserializer::from(Spanned::new(span, table)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> Table<'_> {
        DeTable::parse(text).unwrap().into_inner()
    }

    fn lookup<'t>(root: &'t Table<'_>, path: &str) -> &'t DeValue<'t> {
        let mut node: &DeValue = root.get(path.split('.').next().unwrap()).unwrap().get_ref();
        for part in path.split('.').skip(1) {
            node = match node {
                DeValue::Table(t) => t.get(part).unwrap().get_ref(),
                _ => panic!("not a table at {part}"),
            };
        }
        node
    }

    #[test]
    fn patches_merge_tables_and_replace_values() {
        let mut base = table("[a]\nx = 1\ny = [1, 2]\n[a.b]\nz = 'keep'\n");
        let patch = table("[a]\ny = [3]\nw = true\n[a.b]\nq = 2\n");
        merge(&mut base, &patch).unwrap();
        assert_eq!(lookup(&base, "a.x").as_integer().unwrap().as_str(), "1");
        assert_eq!(lookup(&base, "a.y").as_array().unwrap().len(), 1);
        assert_eq!(lookup(&base, "a.w").as_bool(), Some(true));
        assert_eq!(lookup(&base, "a.b.z").as_str(), Some("keep"));
        assert_eq!(lookup(&base, "a.b.q").as_integer().unwrap().as_str(), "2");
    }

    #[test]
    fn merged_values_keep_the_span_of_the_patch() {
        let text = "[a]\nx = 1\n[patch.a]\nx = 2\n";
        let mut root = table(text);
        let (_, patch) = take(&mut root, "patch").unwrap();
        let DeValue::Table(patch) = patch.into_inner() else {
            panic!()
        };
        merge(&mut root, &patch).unwrap();
        let x = root
            .get("a")
            .unwrap()
            .get_ref()
            .as_table()
            .unwrap()
            .get("x")
            .unwrap();
        assert_eq!(&text[x.span()], "2");
    }

    #[test]
    fn a_patch_keyed_by_element_number_merges_into_array_elements() {
        let mut base = table("[f]\nsteps = [{ a = 1, b = 2 }, { a = 3 }]\n");
        let patch = table("[f.steps.1]\na = 4\nc = 5\n");
        merge(&mut base, &patch).unwrap();
        let steps = lookup(&base, "f.steps").as_array().unwrap();
        let second = steps[1].get_ref().as_table().unwrap();
        assert_eq!(
            second
                .get("a")
                .unwrap()
                .get_ref()
                .as_integer()
                .unwrap()
                .as_str(),
            "4"
        );
        assert!(second.contains_key("c"));
        let first = steps[0].get_ref().as_table().unwrap();
        assert_eq!(
            first
                .get("b")
                .unwrap()
                .get_ref()
                .as_integer()
                .unwrap()
                .as_str(),
            "2"
        );
        let (_, reason) = merge(&mut base, &table("[f.steps.2]\na = 1\n")).unwrap_err();
        assert!(
            reason.contains("`2` is not an element of this array of 2"),
            "{reason}"
        );
    }

    #[test]
    fn flatten_names_every_value_by_its_path_in_sorted_order() {
        let root = table(
            "[b]\nsteps = [{ redis = { key = 'k' }, on_error = 'next' }, { db = {} }]\n\
             [a]\nx = 1.5\ny = [1, 'two']\nz = { p = true }\n",
        );
        let flat: Vec<(String, String)> = flatten(&root).into_iter().collect();
        let expected = [
            ("a.x", "1.5"),
            ("a.y", "[1, \"two\"]"),
            ("a.z.p", "true"),
            ("b.steps.0.on_error", "\"next\""),
            ("b.steps.0.redis.key", "\"k\""),
            ("b.steps.1.db", "{}"),
        ];
        let expected: Vec<(String, String)> = expected
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(flat, expected);
    }

    #[test]
    fn a_shifted_value_keeps_its_shape_with_every_span_moved() {
        let text = "value = { a = [1, { b = 2 }] }";
        let mut root = table(text);
        let (_, mut value) = take(&mut root, "value").unwrap();
        shift(&mut value, 100);
        assert_eq!(value.span(), 108..text.len() + 100);
        let inner = value.get_ref().as_table().unwrap();
        let (key, a) = inner.get_key_value("a").unwrap();
        assert_eq!(key.span(), 110..111);
        let items = a.get_ref().as_array().unwrap();
        assert_eq!(
            &text[items[0].span().start - 100..items[0].span().end - 100],
            "1"
        );
        let b = items[1].get_ref().as_table().unwrap().get("b").unwrap();
        assert_eq!(&text[b.span().start - 100..b.span().end - 100], "2");
    }

    #[test]
    fn set_path_needs_existing_parent_tables() {
        let mut root = table("[loads.blobs]\ncount = 1\n");
        let value = Spanned::new(0..1, DeValue::Boolean(true));
        assert!(set_path(&mut root, "loads.blobs.count", 0..1, value.clone()).is_ok());
        let error = set_path(&mut root, "loads.nope.count", 0..1, value.clone()).unwrap_err();
        assert!(
            error.ends_with("has no `loads.nope`, so `loads.nope.count` cannot be set"),
            "{error}"
        );
        let error = set_path(&mut root, "loads.blob.count", 0..1, value.clone()).unwrap_err();
        assert!(
            error.ends_with("cannot be set: did you mean `loads.blobs`?"),
            "{error}"
        );
        let error = set_path(&mut root, "loads.blobs.count.x", 0..1, value.clone()).unwrap_err();
        assert!(
            error.contains("`loads.blobs.count` is not a table"),
            "{error}"
        );
        // A table whose keys all have defaults is made when missing; others are not.
        assert!(set_path(&mut root, "run.memory_max", 0..1, value.clone()).is_ok());
        assert!(
            matches!(root.get("run").map(Spanned::get_ref), Some(DeValue::Table(t)) if t.contains_key("memory_max"))
        );
        assert!(set_path(&mut root, "http.nope", 0..1, value).is_err());
    }

    /// Issue 29: a list of tables (a flow's steps) is entered by an element's index, the
    /// address a variant's patch and `[explore.params]` use.
    #[test]
    fn set_path_enters_a_list_of_tables_by_index() {
        let mut root = table("[flows.f]\nsteps = [{ work = \"1ms\" }, { work = \"2ms\" }]\n");
        let value = Spanned::new(0..1, DeValue::Boolean(true));
        assert!(set_path(&mut root, "flows.f.steps.1.on_error", 0..1, value.clone()).is_ok());
        let settings = flatten(&root);
        assert_eq!(settings["flows.f.steps.1.on_error"], "true");
        assert_eq!(settings["flows.f.steps.0.work"], "\"1ms\"");
        // The index as the last part replaces the whole element.
        assert!(set_path(&mut root, "flows.f.steps.0", 0..1, value.clone()).is_ok());
        assert_eq!(
            flatten(&root)["flows.f.steps"],
            "[true, { on_error = true, work = \"2ms\" }]"
        );
        for (path, message) in [
            (
                "flows.f.steps.2.work",
                "`flows.f.steps` has 2 elements (from 0)",
            ),
            (
                "flows.f.steps.x.work",
                "`flows.f.steps` is a list: name an element by its index",
            ),
            ("flows.f.steps.0.work", "`flows.f.steps.0` is not a table"),
        ] {
            let error = set_path(&mut root, path, 0..1, value.clone()).unwrap_err();
            assert!(error.contains(message), "{path}: {error}");
        }
    }
}

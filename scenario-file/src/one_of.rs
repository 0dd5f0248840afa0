//! Tables in which exactly one of some keys may be set: a step's action (`redis`, `db`, ...),
//! a breaker's rule (`failures` or `failure_rate`). Such a table is read through [`OneOf`],
//! which sees every key before the table's reader does: a second tag, or a key that belongs
//! inside a tag's own table, is rejected at that key, so the error names its line, column
//! and key like any other serde error.
//!
//! A declared table names its `OneOf` in `keys::TableSpec::one_of`, and `raw::RawTable`
//! reads it through [`OneOf::read`]; a serde-derived struct can too, deriving with
//! `#[serde(remote = "Self")]` and implementing `Deserialize` by calling its derived
//! function through [`OneOf::read`] (this module's tests do).

use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};

/// The keys of a tag's own table (see [`fields_of`]).
pub type Fields = fn() -> &'static [&'static str];

/// What a table with tags accepts.
pub struct OneOf {
    /// The keys of which at most one may be set, each with the keys of its own table (empty
    /// for a tag whose value is not a table), for [`OneOf::hint`].
    pub tags: &'static [(&'static str, Fields)],
    /// What the table is, for messages: "a step", "a breaker".
    pub what: &'static str,
    /// What a tag stands for: "action", "rule to open".
    pub tag_noun: &'static str,
    /// What to do instead of setting two tags.
    pub advice: &'static str,
    /// Whether a table without a tag is refused. A breaker's rule is not required: a preset
    /// may supply it (the validator then checks that one of them does).
    pub tag_required: bool,
}

impl OneOf {
    /// Deserialises `T` with its derived function `derived`, rejecting keys as above and,
    /// when `tag_required`, a table without a tag: a `T` read has exactly one tag set (at most
    /// one otherwise).
    pub fn read<'de, D, T>(
        &'static self,
        deserializer: D,
        derived: impl FnOnce(Table<'_, D>) -> Result<T, D::Error>,
    ) -> Result<T, D::Error>
    where
        D: Deserializer<'de>,
    {
        let seen = Cell::new(None);
        derived(Table {
            inner: deserializer,
            rules: Rules {
                one_of: self,
                seen: &seen,
            },
        })
    }

    fn missing(&self) -> String {
        format!(
            "{} has no {}: give it one of {}",
            self.what,
            self.tag_noun,
            self.tag_list()
        )
    }

    /// Why `key` is refused, if it is: a second tag, or a key of a tag's own table.
    fn refuse(&self, key: &str, seen: &Cell<Option<&'static str>>) -> Option<String> {
        if let Some(&(tag, _)) = self.tags.iter().find(|(tag, _)| *tag == key) {
            return seen.replace(Some(tag)).map(|first| {
                format!(
                    "{} has one {} ({}), and this one already has `{first}`: {}",
                    self.what,
                    self.tag_noun,
                    self.tag_list(),
                    self.advice
                )
            });
        }
        self.hint(key)
    }

    /// For a key that belongs inside a tag's table: where to write it.
    fn hint(&self, key: &str) -> Option<String> {
        let owners: Vec<&str> = self
            .tags
            .iter()
            .filter(|(_, fields)| fields().contains(&key))
            .map(|(tag, _)| *tag)
            .collect();
        let first = owners.first()?;
        Some(format!(
            "belongs inside the {}'s table (`{}`), e.g. {first} = {{ …, {key} = … }}",
            self.tag_noun,
            owners.join("`, `")
        ))
    }

    fn tag_list(&self) -> String {
        let names: Vec<String> = self
            .tags
            .iter()
            .map(|(tag, _)| format!("`{tag}`"))
            .collect();
        names.join(", ")
    }
}

/// The names of the fields of a derived struct `T`, as serde knows them (for messages).
pub fn fields_of<T: de::DeserializeOwned>() -> &'static [&'static str] {
    struct Capture<'a>(&'a Cell<&'static [&'static str]>);
    impl<'de> Deserializer<'de> for Capture<'_> {
        type Error = de::value::Error;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(de::Error::custom("not a struct"))
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _name: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            self.0.set(fields);
            Err(de::Error::custom("only the fields were wanted"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
            byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
            identifier ignored_any
        }
    }
    let fields = Cell::new(&[][..]);
    let _ = T::deserialize(Capture(&fields));
    fields.get()
}

#[derive(Clone, Copy)]
struct Rules<'a> {
    one_of: &'static OneOf,
    seen: &'a Cell<Option<&'static str>>,
}

impl Rules<'_> {
    fn check<E: de::Error>(self, key: &str) -> Result<(), E> {
        match self.one_of.refuse(key, self.seen) {
            None => Ok(()),
            Some(message) => Err(E::custom(message)),
        }
    }
}

/// A deserializer of the table, or of one of its keys, that checks what it reads on the way
/// through: a key against the rules, a table for a missing tag.
pub struct Table<'a, D> {
    inner: D,
    rules: Rules<'a>,
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Table<'_, D> {
    type Error = D::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_any(self.rules.visitor(visitor))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        let visitor = self.rules.visitor(visitor);
        self.inner.deserialize_struct(name, fields, visitor)
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.inner
            .deserialize_identifier(self.rules.visitor(visitor))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
        byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
        ignored_any
    }
}

/// Visits the table (a map) or one of its keys (a string), checking it.
struct Checked<'a, V> {
    inner: V,
    rules: Rules<'a>,
}

impl<'a> Rules<'a> {
    fn visitor<V>(self, inner: V) -> Checked<'a, V> {
        Checked { inner, rules: self }
    }
}

impl<'de, V: Visitor<'de>> Visitor<'de> for Checked<'_, V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.expecting(f)
    }

    /// Reads the table's entries; a table without a tag is refused here, while the table is
    /// being read, so the error carries the table's span.
    fn visit_map<M: MapAccess<'de>>(self, map: M) -> Result<V::Value, M::Error> {
        let table = self.inner.visit_map(Entries {
            inner: map,
            rules: self.rules,
        })?;
        match self.rules.seen.get() {
            None if self.rules.one_of.tag_required => {
                Err(de::Error::custom(self.rules.one_of.missing()))
            }
            _ => Ok(table),
        }
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<V::Value, E> {
        self.rules.check(key)?;
        self.inner.visit_str(key)
    }

    fn visit_borrowed_str<E: de::Error>(self, key: &'de str) -> Result<V::Value, E> {
        self.rules.check(key)?;
        self.inner.visit_borrowed_str(key)
    }

    fn visit_string<E: de::Error>(self, key: String) -> Result<V::Value, E> {
        self.rules.check(&key)?;
        self.inner.visit_string(key)
    }
}

struct Entries<'a, M> {
    inner: M,
    rules: Rules<'a>,
}

impl<'de, M: MapAccess<'de>> MapAccess<'de> for Entries<'_, M> {
    type Error = M::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, M::Error> {
        self.inner.next_key_seed(KeySeed {
            inner: seed,
            rules: self.rules,
        })
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, M::Error> {
        self.inner.next_value_seed(seed)
    }

    fn size_hint(&self) -> Option<usize> {
        self.inner.size_hint()
    }
}

/// Reads a key: the error of a refused key is raised here, so it carries the key's span.
struct KeySeed<'a, K> {
    inner: K,
    rules: Rules<'a>,
}

impl<'de, K: DeserializeSeed<'de>> DeserializeSeed<'de> for KeySeed<'_, K> {
    type Value = K::Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<K::Value, D::Error> {
        self.inner.deserialize(Table {
            inner: deserializer,
            rules: self.rules,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    /// A table that is a `circle` or a `square`, with a colour.
    #[derive(Deserialize)]
    #[serde(remote = "Self", deny_unknown_fields)]
    struct Shape {
        circle: Option<Circle>,
        square: Option<u32>,
        #[allow(dead_code)]
        colour: Option<String>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Circle {
        #[allow(dead_code)]
        radius: u32,
    }

    const SHAPES: OneOf = OneOf {
        tags: &[("circle", fields_of::<Circle>), ("square", || &[])],
        what: "a shape",
        tag_noun: "form",
        advice: "draw two shapes",
        tag_required: true,
    };

    impl<'de> Deserialize<'de> for Shape {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            SHAPES.read(deserializer, |table| Shape::deserialize(table))
        }
    }

    /// The error for `text`, with the text it points at.
    fn error(text: &str) -> (String, String) {
        let error = toml::from_str::<Shape>(text).err().expect("refused");
        let span = error.span().expect("located");
        (error.message().to_owned(), text[span].to_owned())
    }

    #[test]
    fn one_tag_is_read() {
        let shape: Shape = toml::from_str("circle = { radius = 2 }\ncolour = \"red\"").unwrap();
        assert!(shape.circle.is_some() && shape.square.is_none());
    }

    #[test]
    fn a_second_tag_is_refused_at_its_key() {
        let (message, at) = error("circle = { radius = 2 }\nsquare = 3");
        assert_eq!(at, "square");
        assert_eq!(
            message,
            "a shape has one form (`circle`, `square`), and this one already has `circle`: \
             draw two shapes"
        );
    }

    #[test]
    fn a_key_of_a_tags_table_is_refused_outside_it() {
        let (message, at) = error("radius = 2\nsquare = 3");
        assert_eq!(at, "radius");
        assert_eq!(
            message,
            "belongs inside the form's table (`circle`), e.g. circle = { …, radius = … }"
        );
    }

    #[test]
    fn a_table_without_a_tag_is_refused() {
        let (message, _) = error("colour = \"red\"");
        assert_eq!(
            message,
            "a shape has no form: give it one of `circle`, `square`"
        );
    }

    #[test]
    fn other_keys_keep_serde_s_message() {
        let (message, at) = error("square = 3\ncolor = \"red\"");
        assert_eq!(at, "color");
        assert!(message.starts_with("unknown field `color`"), "{message}");
    }
}

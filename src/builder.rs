//! `with_*` builder methods for configuration structs, generated from one list of fields so that
//! every config (`JsonConfig`, `SchemaOptions`, `RegexConfig`, `CfgConfig`, `DfaConfig`, …) is
//! built the same way: `Config::default().with_a(..).with_b(..)`.
//!
//! Configs are `#[non_exhaustive]` (a new field breaks no caller) and keep their fields public
//! for reading and for `config.field = value` on a value one already has; the documented
//! defaults are on each field and in each `Default` impl.

/// `builder!(Type { /// doc \n with_field => field: FieldType, ... })` adds
/// `Type::with_field(self, value) -> Self`, which sets `field`.
macro_rules! builder {
    ($ty:ty { $( $(#[$doc:meta])* $method:ident => $field:ident : $fty:ty ),* $(,)? }) => {
        impl $ty {
            $(
                $(#[$doc])*
                #[must_use]
                pub fn $method(mut self, value: $fty) -> Self {
                    self.$field = value;
                    self
                }
            )*
        }
    };
}

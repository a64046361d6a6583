//! Settings named by a word ([`RecoveryPolicy`](crate::RecoveryPolicy)'s `replay`/`seal`,
//! [`ContextMode`](crate::driver::ContextMode)'s `full`/`delta`): the `FromStr` and `as_str`
//! every such enum gets from [`named_enum!`], and the [`UnknownName`] error of a word that is
//! none of its names. Its own file, depending on nothing, so that the message and driver types
//! that use it do not import the error module (which imports them).

/// A setting named by a word that is not one of its names, as
/// [`RecoveryPolicy`](crate::RecoveryPolicy)'s and
/// [`ContextMode`](crate::driver::ContextMode)'s `FromStr` report it: every host that reads the
/// word from a flag, an option or a keyword argument gets the same answer.
///
/// ```
/// use runcore::RecoveryPolicy;
///
/// let error = "retry".parse::<RecoveryPolicy>().unwrap_err();
/// assert_eq!(error.to_string(), r#"policy must be "replay" or "seal", got "retry""#);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownName {
    /// The setting (`policy`, `context`).
    pub setting: &'static str,
    /// Its names.
    pub expected: &'static [&'static str],
    /// The word given.
    pub got: String,
}

impl std::fmt::Display for UnknownName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} must be ", self.setting)?;
        for (i, name) in self.expected.iter().enumerate() {
            match i {
                0 => {}
                i if i + 1 == self.expected.len() => f.write_str(" or ")?,
                _ => f.write_str(", ")?,
            }
            write!(f, "{name:?}")?;
        }
        write!(f, ", got {:?}", self.got)
    }
}

impl std::error::Error for UnknownName {}

/// `FromStr` and `as_str` over a fieldless enum's snake_case names (its serde names).
macro_rules! named_enum {
    ($ty:ty, $setting:literal, { $($variant:ident => $name:literal),+ $(,)? }) => {
        impl $ty {
            /// The name hosts write for this value (its serde name).
            pub fn as_str(self) -> &'static str {
                match self {
                    $(<$ty>::$variant => $name,)+
                }
            }
        }

        impl std::str::FromStr for $ty {
            type Err = $crate::named::UnknownName;

            fn from_str(name: &str) -> Result<Self, Self::Err> {
                match name {
                    $($name => Ok(<$ty>::$variant),)+
                    other => Err($crate::named::UnknownName {
                        setting: $setting,
                        expected: &[$($name),+],
                        got: other.to_owned(),
                    }),
                }
            }
        }
    };
}

pub(crate) use named_enum;

//! How each recipe shows in `{:?}`: its kind, name and lease options
//! (`lease::options::debug`), then what is its own. In one place, so that
//! every recipe shows the same fields the same way; never a token.

use std::fmt;

use crate::primitives::election::Election;
use crate::primitives::lock::Lock;
use crate::primitives::multi::MultiLock;
use crate::primitives::rwlock::RwLock;
use crate::primitives::semaphore::Semaphore;

/// `Recipe { shown: spec_field, … }`: a `Debug` for a recipe whose
/// `inner` is its spec, showing `spec_field` as `shown`.
macro_rules! shown {
    ($($recipe:ident { $($shown:ident: $field:ident),* })*) => {
        $(
            impl fmt::Debug for $recipe {
                fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    let spec = &self.inner;
                    let kind = stringify!($recipe);
                    crate::primitives::lease::options::debug(f, kind, &spec.name, &spec.lease)
                        $(.field(stringify!($shown), &spec.$field))*
                        .finish()
                }
            }
        )*
    };
}

shown! {
    Lock { fair_lease: fair_lease, replicas: replicas }
    MultiLock { one_round_trip: one_script }
    RwLock {}
    Election {}
    Semaphore { permits: permits }
}

//! Which roles may call which gRPC method: the one table of it.

use tidemark_service::auth::Role;

/// Who may call a gRPC path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum MethodAccess {
    /// Anyone (health).
    Open,
    /// Any authenticated caller.
    Authenticated,
    /// Callers with one of these roles.
    Roles(&'static [Role]),
}

const READ_ONLY_ADMIN: [&str; 5] = [
    "ListConsumers",
    "DescribeConsumer",
    "ListHistory",
    "GetTableOptions",
    "ListTables",
];

pub(super) fn access(path: &str, reflection_requires_auth: bool) -> MethodAccess {
    let mut parts = path.trim_start_matches('/').splitn(2, '/');
    let service = parts.next().unwrap_or_default();
    let method = parts.next().unwrap_or_default();
    match service {
        "grpc.health.v1.Health" => MethodAccess::Open,
        "grpc.reflection.v1.ServerReflection" | "grpc.reflection.v1alpha.ServerReflection" => {
            if reflection_requires_auth {
                MethodAccess::Authenticated
            } else {
                MethodAccess::Open
            }
        }
        "tidemark.v1.Coordinator" => MethodAccess::Roles(&[Role::Worker, Role::Operator]),
        // Every Retention call is a read (fences and their explanations);
        // SPEC §7 lets viewers make them.
        "tidemark.v1.Retention" => MethodAccess::Roles(&[Role::Maintainer, Role::Viewer, Role::Operator]),
        "tidemark.v1.Admin" if READ_ONLY_ADMIN.contains(&method) => {
            MethodAccess::Roles(&[Role::Viewer, Role::Operator])
        }
        "tidemark.v1.Admin" => MethodAccess::Roles(&[Role::Operator]),
        _ => MethodAccess::Authenticated,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_per_method() {
        use MethodAccess::*;
        assert_eq!(access("/grpc.health.v1.Health/Check", false), Open);
        assert_eq!(
            access("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", false),
            Open
        );
        assert_eq!(
            access("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", true),
            Authenticated
        );
        assert_eq!(
            access("/tidemark.v1.Coordinator/CommitBatch", false),
            Roles(&[Role::Worker, Role::Operator])
        );
        assert_eq!(
            access("/tidemark.v1.Admin/ListConsumers", false),
            Roles(&[Role::Viewer, Role::Operator])
        );
        assert_eq!(
            access("/tidemark.v1.Admin/ResetConsumer", false),
            Roles(&[Role::Operator])
        );
        assert_eq!(
            access("/tidemark.v1.Retention/GetRetentionFence", false),
            Roles(&[Role::Maintainer, Role::Viewer, Role::Operator])
        );
    }
}

output "ignition" {
  description = "The node's Ignition config (JSON, spec 3.4). Sensitive: it holds the bootstrap token and, on a controller, the CA key."
  value       = jsonencode(local.ignition)
  sensitive   = true
}

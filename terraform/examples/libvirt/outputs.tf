output "kubeconfig" {
  value     = module.cluster.kubeconfig
  sensitive = true
}

output "nodes" {
  value = module.cluster.nodes
}

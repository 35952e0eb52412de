output "kubeconfig" {
  description = "Admin kubeconfig of the cluster (the API server answers once kubeadm init has run on the controller, minutes after apply)."
  sensitive   = true
  value = yamlencode({
    apiVersion = "v1"
    kind       = "Config"
    clusters = [{
      name    = var.cluster_name
      cluster = { server = "https://${local.controller}:6443", "certificate-authority-data" = base64encode(var.ca_cert_pem) }
    }]
    users = [{
      name = "${var.cluster_name}-admin"
      user = { "client-certificate-data" = base64encode(var.admin_cert_pem), "client-key-data" = base64encode(var.admin_key_pem) }
    }]
    contexts = [{
      name    = var.cluster_name
      context = { cluster = var.cluster_name, user = "${var.cluster_name}-admin" }
    }]
    "current-context" = var.cluster_name
  })
}

output "controller_address" {
  description = "The controller's address; the API server is https://<it>:6443."
  value       = local.controller
}

output "nodes" {
  description = "Node name => address."
  value       = { for k, v in local.nodes : k => v.ip }
}

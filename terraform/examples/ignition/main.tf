# Per-node Ignition for a Flatcar cluster on any platform: render it here, hand it to your provider
# (AWS user_data, OpenStack user_data, vSphere guestinfo, QEMU fw_cfg, ...). No provider needed.
#
#   go run ../../../hack/cluster-pki > secrets.auto.tfvars.json   # CA, admin cert, bootstrap token
#   terraform init && terraform apply
#   terraform output -raw controller_ignition > controller.ign
terraform {
  required_version = ">= 1.5"
}

variable "controller_address" {
  description = "Where the workers reach the controller's API server."
  type        = string
  default     = "10.17.3.10"
}

variable "workers" {
  description = "Worker hostnames."
  type        = list(string)
  default     = ["worker-0", "worker-1"]
}

variable "bootstrap_token" {
  type      = string
  sensitive = true
}

variable "ca_cert_pem" {
  type = string
}

variable "ca_key_pem" {
  type      = string
  sensitive = true
}

module "controller" {
  source             = "../../modules/flatcar-ignition"
  name               = "controller"
  role               = "controller"
  controller_address = var.controller_address
  bootstrap_token    = var.bootstrap_token
  ca_cert_pem        = var.ca_cert_pem
  ca_key_pem         = var.ca_key_pem
}

module "worker" {
  source             = "../../modules/flatcar-ignition"
  for_each           = toset(var.workers)
  name               = each.key
  role               = "worker"
  controller_address = var.controller_address
  bootstrap_token    = var.bootstrap_token
  ca_cert_pem        = var.ca_cert_pem
}

output "controller_ignition" {
  value     = module.controller.ignition
  sensitive = true
}

output "worker_ignition" {
  value     = { for k, m in module.worker : k => m.ignition }
  sensitive = true
}

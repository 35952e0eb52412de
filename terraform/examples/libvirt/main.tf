# A local Flatcar Kubernetes cluster with Slipway's snippets, on libvirt.
#
#   make flatcar-image                                             # or any flatcar_production_qemu_image.img
#   go run ../../../hack/cluster-pki > secrets.auto.tfvars.json   # CA, admin cert, bootstrap token
#   terraform init
#   terraform apply -var flatcar_image=$HOME/.cache/slipway/flatcar/stable-<version>/flatcar_production_qemu_image.img
#   terraform output -raw kubeconfig > kubeconfig
#
# `make cluster BACKEND=terraform` does all of it and installs Slipway.
terraform {
  required_version = ">= 1.5"
  required_providers {
    libvirt = {
      source  = "dmacvicar/libvirt"
      version = "0.8.3"
    }
  }
}

provider "libvirt" {
  uri = var.libvirt_uri
}

module "cluster" {
  source          = "../../modules/flatcar-libvirt"
  cluster_name    = var.cluster_name
  flatcar_image   = var.flatcar_image
  worker_count    = var.worker_count
  domain_type     = var.domain_type
  bootstrap_token = var.bootstrap_token
  ca_cert_pem     = var.ca_cert_pem
  ca_key_pem      = var.ca_key_pem
  admin_cert_pem  = var.admin_cert_pem
  admin_key_pem   = var.admin_key_pem
}

// Package api holds Nestlet's wire contracts: the label, annotation and taint
// keys every component agrees on, and the schema of the summary a child
// publishes on its virtual node. It depends on nothing of ours.
package api

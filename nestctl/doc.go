// Package nestctl is what the nestctl command does, as a library: create a
// bootstrap token in a parent and print the join command (CreateToken),
// join a child to a parent by writing its token Secret and Target (Join),
// approve a child's node certificate request (Approve), and read the tree
// below a cluster from its virtual nodes' summaries (LoadTree, Render).
// cmd/nestctl holds only its flags and wiring.
package nestctl

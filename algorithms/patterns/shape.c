/* shape.c — see shape.h. */
#include "algorithms/patterns/shape.h"

#include "core/comm.h"

void weft_shape_btree(int n, int v, int *parent, int child[WEFT_TREE_MAX_CHILDREN])
{
	*parent = -1;
	child[0] = child[1] = -1;
	if (n > 1)
		weft_btree(v, n, parent, child);
}

void weft_shape_dbtree0(int n, int v, int *parent, int child[WEFT_TREE_MAX_CHILDREN])
{
	weft_dbtree(v, 0, n, parent, child);
}

void weft_shape_dbtree1(int n, int v, int *parent, int child[WEFT_TREE_MAX_CHILDREN])
{
	weft_dbtree(v, 1, n, parent, child);
}

void weft_shape_chain(int n, int v, int *parent, int child[WEFT_TREE_MAX_CHILDREN])
{
	*parent = v > 0 ? v - 1 : -1;
	child[0] = v + 1 < n ? v + 1 : -1;
	child[1] = -1;
}

int weft_shape_depth(int n)
{
	int d = 0;
	while ((1 << d) < n)
		d++;
	return d;
}

void weft_shape_place(struct weft_tree_node *t, const struct weft_comm *comm, weft_shape_fn shape,
		      int root_rank)
{
	int n = comm->nranks, rootpos = 0;
	for (int p = 0; p < n; p++)
		if (comm->ring[p] == root_rank)
			rootpos = p;
	int v = (comm->ring_pos - rootpos + n) % n, parent, child[WEFT_TREE_MAX_CHILDREN];
	shape(n, v, &parent, child);
	t->parent = parent < 0 ? -1 : comm->ring[(parent + rootpos) % n];
	t->nchildren = 0;
	for (int c = 0; c < WEFT_TREE_MAX_CHILDREN; c++)
		if (child[c] >= 0)
			t->child[t->nchildren++] = comm->ring[(child[c] + rootpos) % n];
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * layer-check.c - linked with one layer of lib/ whole and the layers below
 * it (tests/meson.build): the link fails if the layer calls up.
 */
int main(void)
{
	return 0;
}

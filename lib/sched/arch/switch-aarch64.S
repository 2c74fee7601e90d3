/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * switch-aarch64.S - the context switch for AArch64 (AAPCS64).
 *
 * A suspended context is its stack pointer; the 176-byte frame holds
 * x19-x28, x29 (frame pointer), x30 (return address), d8-d15 (the low
 * halves of v8-v15, the callee-saved part of the SIMD registers) and FPCR.
 *
 * void fb_ctx_switch(void **save_sp, void *load_sp)
 * fb_ctx_trampoline: first "return" of a new fiber; calls fb_fiber_main().
 * x29 = x30 = 0 ends the fiber's call chain for frame-pointer unwinders
 * (perf record -g, lib/sched/dump.c).
 */
	.text
	.globl	fb_ctx_switch
	.hidden	fb_ctx_switch
	.type	fb_ctx_switch, %function
	.p2align 4
fb_ctx_switch:
	sub	sp, sp, #176
	stp	x19, x20, [sp, #0]
	stp	x21, x22, [sp, #16]
	stp	x23, x24, [sp, #32]
	stp	x25, x26, [sp, #48]
	stp	x27, x28, [sp, #64]
	stp	x29, x30, [sp, #80]
	stp	d8, d9, [sp, #96]
	stp	d10, d11, [sp, #112]
	stp	d12, d13, [sp, #128]
	stp	d14, d15, [sp, #144]
	mrs	x9, fpcr
	str	x9, [sp, #160]
	mov	x9, sp
	str	x9, [x0]
	mov	sp, x1
	ldr	x9, [sp, #160]
	msr	fpcr, x9
	ldp	x19, x20, [sp, #0]
	ldp	x21, x22, [sp, #16]
	ldp	x23, x24, [sp, #32]
	ldp	x25, x26, [sp, #48]
	ldp	x27, x28, [sp, #64]
	ldp	x29, x30, [sp, #80]
	ldp	d8, d9, [sp, #96]
	ldp	d10, d11, [sp, #112]
	ldp	d12, d13, [sp, #128]
	ldp	d14, d15, [sp, #144]
	add	sp, sp, #176
	ret
	.size	fb_ctx_switch, .-fb_ctx_switch

	.globl	fb_ctx_trampoline
	.hidden	fb_ctx_trampoline
	.type	fb_ctx_trampoline, %function
	.p2align 4
fb_ctx_trampoline:
	mov	x29, #0
	mov	x30, #0
	bl	fb_fiber_main
	brk	#0
	.size	fb_ctx_trampoline, .-fb_ctx_trampoline

	.section .note.GNU-stack,"",%progbits

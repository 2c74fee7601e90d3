/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * switch-x86_64.S - the context switch for x86-64 (System V ABI).
 *
 * A suspended context is its stack pointer; the stack holds, from the top
 * of the frame down: return address, rbp, rbx, r12-r15, and one 8-byte slot
 * with MXCSR (low 4 bytes) and the x87 control word.  These are exactly the
 * registers the ABI says a callee must preserve; everything else is dead at
 * a call, so it need not be saved.
 *
 * void fb_ctx_switch(void **save_sp, void *load_sp)
 *	Save the caller's context, store its stack pointer in *save_sp, and
 *	resume the context whose stack pointer is load_sp.
 *
 * fb_ctx_trampoline: where a new fiber's first switch "returns" to.  The
 * frame built by fb_ctx_make() puts it in the return slot; it calls
 * fb_fiber_main(), which never returns.  It ends the fiber's call chain
 * for every unwinder: rbp = 0 ends a frame-pointer walk (perf record -g,
 * lib/sched/dump.c, gdb without debug info), and the undefined return
 * address ends a DWARF one, so a fiber's stack never seems to continue
 * into whatever the previous owner of the stack left there.
 */
	.text
	.globl	fb_ctx_switch
	.hidden	fb_ctx_switch
	.type	fb_ctx_switch, @function
	.p2align 4
fb_ctx_switch:
	.cfi_startproc
	pushq	%rbp
	pushq	%rbx
	pushq	%r12
	pushq	%r13
	pushq	%r14
	pushq	%r15
	subq	$8, %rsp
	stmxcsr	(%rsp)
	fnstcw	4(%rsp)
	movq	%rsp, (%rdi)
	movq	%rsi, %rsp
	ldmxcsr	(%rsp)
	fldcw	4(%rsp)
	addq	$8, %rsp
	popq	%r15
	popq	%r14
	popq	%r13
	popq	%r12
	popq	%rbx
	popq	%rbp
	ret
	.cfi_endproc
	.size	fb_ctx_switch, .-fb_ctx_switch

	.globl	fb_ctx_trampoline
	.hidden	fb_ctx_trampoline
	.type	fb_ctx_trampoline, @function
	.p2align 4
fb_ctx_trampoline:
	.cfi_startproc
	.cfi_undefined rip
	xorl	%ebp, %ebp
	call	fb_fiber_main
	ud2
	.cfi_endproc
	.size	fb_ctx_trampoline, .-fb_ctx_trampoline

	.section .note.GNU-stack,"",@progbits

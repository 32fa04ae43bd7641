	.text
	.file	"kernel"
	.section	.rodata.cst4,"aM",@progbits,4
	.p2align	2
.LCPI0_0:
	.long	0x3f800000
.LCPI0_1:
	.long	0x40000000
	.section	.rodata.cst16,"aM",@progbits,16
	.p2align	4
.LCPI0_2:
	.long	1
	.long	4
	.long	3
	.long	3
	.text
	.globl	k_c80_0_kernel_0_serial
	.p2align	4, 0x90
	.type	k_c80_0_kernel_0_serial,@function
k_c80_0_kernel_0_serial:
	movq	8(%rdi), %rax
	movq	88(%rax), %rax
	vmovsd	4(%rax), %xmm5
	vpermilps	$225, %xmm5, %xmm10
	vmovss	.LCPI0_0(%rip), %xmm8
	vmovss	.LCPI0_1(%rip), %xmm12
	vmovaps	%xmm12, %xmm7
	vfmadd213ss	%xmm8, %xmm5, %xmm7
	vbroadcastss	(%rax), %xmm2
	vbroadcastss	.LCPI0_1(%rip), %xmm0
	vbroadcastss	.LCPI0_0(%rip), %xmm9
	vblendps	$1, %xmm2, %xmm5, %xmm3
	vmovaps	%xmm0, %xmm6
	vfmadd213ps	%xmm9, %xmm3, %xmm6
	vmovaps	.LCPI0_2(%rip), %xmm11
	vmovaps	%xmm6, %xmm1
	vpermt2ps	%xmm7, %xmm11, %xmm1
	vmulps	%xmm3, %xmm1, %xmm1
	vfmsub231ps	%xmm10, %xmm6, %xmm1
	vmulss	%xmm5, %xmm6, %xmm3
	vfnmadd231ss	%xmm7, %xmm2, %xmm3
	vblendps	$2, %xmm2, %xmm5, %xmm6
	vfmadd231ps	%xmm1, %xmm2, %xmm6
	vmovshdup	%xmm5, %xmm1
	vfnmadd231ss	%xmm3, %xmm2, %xmm1
	vpermilps	$225, %xmm6, %xmm2
	vmovlps	%xmm2, 96(%rax)
	vmovss	%xmm1, 104(%rax)
	movq	8(%rdi), %rax
	movq	88(%rax), %rax
	vmovsd	16(%rax), %xmm1
	vpermilps	$225, %xmm1, %xmm2
	vmovaps	%xmm12, %xmm3
	vfmadd213ss	%xmm8, %xmm1, %xmm3
	vbroadcastss	12(%rax), %xmm5
	vblendps	$1, %xmm5, %xmm1, %xmm6
	vmovaps	%xmm0, %xmm4
	vfmadd213ps	%xmm9, %xmm6, %xmm4
	vmovaps	%xmm4, %xmm7
	vpermt2ps	%xmm3, %xmm11, %xmm7
	vmulps	%xmm6, %xmm7, %xmm6
	vfmsub231ps	%xmm2, %xmm4, %xmm6
	vmulss	%xmm1, %xmm4, %xmm2
	vfnmadd231ss	%xmm3, %xmm5, %xmm2
	vblendps	$2, %xmm5, %xmm1, %xmm3
	vfmadd231ps	%xmm6, %xmm5, %xmm3
	vmovshdup	%xmm1, %xmm1
	vfnmadd231ss	%xmm2, %xmm5, %xmm1
	vpermilps	$225, %xmm3, %xmm2
	vmovlps	%xmm2, 108(%rax)
	vmovss	%xmm1, 116(%rax)
	movq	8(%rdi), %rax
	movq	88(%rax), %rax
	vmovsd	28(%rax), %xmm1
	vpermilps	$225, %xmm1, %xmm2
	vmovaps	%xmm12, %xmm3
	vfmadd213ss	%xmm8, %xmm1, %xmm3
	vbroadcastss	24(%rax), %xmm4
	vblendps	$1, %xmm4, %xmm1, %xmm5
	vmovaps	%xmm0, %xmm6
	vfmadd213ps	%xmm9, %xmm5, %xmm6
	vmovaps	%xmm6, %xmm7
	vpermt2ps	%xmm3, %xmm11, %xmm7
	vmulps	%xmm5, %xmm7, %xmm5
	vfmsub231ps	%xmm2, %xmm6, %xmm5
	vmulss	%xmm1, %xmm6, %xmm2
	vfnmadd231ss	%xmm3, %xmm4, %xmm2
	vblendps	$2, %xmm4, %xmm1, %xmm3
	vfmadd231ps	%xmm5, %xmm4, %xmm3
	vmovshdup	%xmm1, %xmm1
	vfnmadd231ss	%xmm2, %xmm4, %xmm1
	vpermilps	$225, %xmm3, %xmm2
	vmovlps	%xmm2, 120(%rax)
	vmovss	%xmm1, 128(%rax)
	movq	8(%rdi), %rax
	movq	88(%rax), %rax
	vmovsd	40(%rax), %xmm1
	vpermilps	$225, %xmm1, %xmm2
	vmovaps	%xmm12, %xmm3
	vfmadd213ss	%xmm8, %xmm1, %xmm3
	vbroadcastss	36(%rax), %xmm4
	vblendps	$1, %xmm4, %xmm1, %xmm5
	vmovaps	%xmm0, %xmm6
	vfmadd213ps	%xmm9, %xmm5, %xmm6
	vmovaps	%xmm6, %xmm7
	vpermt2ps	%xmm3, %xmm11, %xmm7
	vmulps	%xmm5, %xmm7, %xmm5
	vfmsub231ps	%xmm2, %xmm6, %xmm5
	vmulss	%xmm1, %xmm6, %xmm2
	vfnmadd231ss	%xmm3, %xmm4, %xmm2
	vblendps	$2, %xmm4, %xmm1, %xmm3
	vfmadd231ps	%xmm5, %xmm4, %xmm3
	vmovshdup	%xmm1, %xmm1
	vfnmadd231ss	%xmm2, %xmm4, %xmm1
	vpermilps	$225, %xmm3, %xmm2
	vmovlps	%xmm2, 132(%rax)
	vmovss	%xmm1, 140(%rax)
	movq	8(%rdi), %rax
	movq	88(%rax), %rax
	vmovsd	52(%rax), %xmm1
	vpermilps	$225, %xmm1, %xmm2
	vmovaps	%xmm12, %xmm3
	vfmadd213ss	%xmm8, %xmm1, %xmm3
	vbroadcastss	48(%rax), %xmm4
	vblendps	$1, %xmm4, %xmm1, %xmm5
	vmovaps	%xmm0, %xmm6
	vfmadd213ps	%xmm9, %xmm5, %xmm6
	vmovaps	%xmm6, %xmm7
	vpermt2ps	%xmm3, %xmm11, %xmm7
	vmulps	%xmm5, %xmm7, %xmm5
	vfmsub231ps	%xmm2, %xmm6, %xmm5
	vmulss	%xmm1, %xmm6, %xmm2
	vfnmadd231ss	%xmm3, %xmm4, %xmm2
	vblendps	$2, %xmm4, %xmm1, %xmm3
	vfmadd231ps	%xmm5, %xmm4, %xmm3
	vmovshdup	%xmm1, %xmm1
	vfnmadd231ss	%xmm2, %xmm4, %xmm1
	vpermilps	$225, %xmm3, %xmm2
	vmovlps	%xmm2, 144(%rax)
	vmovss	%xmm1, 152(%rax)
	movq	8(%rdi), %rax
	movq	88(%rax), %rax
	vmovsd	64(%rax), %xmm1
	vpermilps	$225, %xmm1, %xmm2
	vmovaps	%xmm12, %xmm3
	vfmadd213ss	%xmm8, %xmm1, %xmm3
	vbroadcastss	60(%rax), %xmm4
	vblendps	$1, %xmm4, %xmm1, %xmm5
	vmovaps	%xmm0, %xmm6
	vfmadd213ps	%xmm9, %xmm5, %xmm6
	vmovaps	%xmm6, %xmm7
	vpermt2ps	%xmm3, %xmm11, %xmm7
	vmulps	%xmm5, %xmm7, %xmm5
	vfmsub231ps	%xmm2, %xmm6, %xmm5
	vmulss	%xmm1, %xmm6, %xmm2
	vfnmadd231ss	%xmm3, %xmm4, %xmm2
	vblendps	$2, %xmm4, %xmm1, %xmm3
	vfmadd231ps	%xmm5, %xmm4, %xmm3
	vmovshdup	%xmm1, %xmm1
	vfnmadd231ss	%xmm2, %xmm4, %xmm1
	vpermilps	$225, %xmm3, %xmm2
	vmovlps	%xmm2, 156(%rax)
	vmovss	%xmm1, 164(%rax)
	movq	8(%rdi), %rax
	movq	88(%rax), %rax
	vmovsd	76(%rax), %xmm1
	vpermilps	$225, %xmm1, %xmm2
	vmovaps	%xmm12, %xmm3
	vfmadd213ss	%xmm8, %xmm1, %xmm3
	vbroadcastss	72(%rax), %xmm4
	vblendps	$1, %xmm4, %xmm1, %xmm5
	vmovaps	%xmm0, %xmm6
	vfmadd213ps	%xmm9, %xmm5, %xmm6
	vmovaps	%xmm6, %xmm7
	vpermt2ps	%xmm3, %xmm11, %xmm7
	vmulps	%xmm5, %xmm7, %xmm5
	vfmsub231ps	%xmm2, %xmm6, %xmm5
	vmulss	%xmm1, %xmm6, %xmm2
	vfnmadd231ss	%xmm3, %xmm4, %xmm2
	vblendps	$2, %xmm4, %xmm1, %xmm3
	vfmadd231ps	%xmm5, %xmm4, %xmm3
	vmovshdup	%xmm1, %xmm1
	vfnmadd231ss	%xmm2, %xmm4, %xmm1
	vpermilps	$225, %xmm3, %xmm2
	vmovlps	%xmm2, 168(%rax)
	vmovss	%xmm1, 176(%rax)
	movq	8(%rdi), %rax
	movq	88(%rax), %rax
	vmovsd	88(%rax), %xmm1
	vpermilps	$225, %xmm1, %xmm2
	vfmadd213ss	%xmm8, %xmm1, %xmm12
	vbroadcastss	84(%rax), %xmm3
	vblendps	$1, %xmm3, %xmm1, %xmm4
	vfmadd213ps	%xmm9, %xmm4, %xmm0
	vpermi2ps	%xmm12, %xmm0, %xmm11
	vmulps	%xmm4, %xmm11, %xmm4
	vfmsub231ps	%xmm2, %xmm0, %xmm4
	vmulss	%xmm1, %xmm0, %xmm0
	vfnmadd231ss	%xmm12, %xmm3, %xmm0
	vblendps	$2, %xmm3, %xmm1, %xmm2
	vfmadd231ps	%xmm4, %xmm3, %xmm2
	vmovshdup	%xmm1, %xmm1
	vfnmadd231ss	%xmm0, %xmm3, %xmm1
	vpermilps	$225, %xmm2, %xmm0
	vmovlps	%xmm0, 180(%rax)
	vmovss	%xmm1, 188(%rax)
	retq
.Lfunc_end0:
	.size	k_c80_0_kernel_0_serial, .Lfunc_end0-k_c80_0_kernel_0_serial

	.ident	"Ubuntu clang version 14.0.6"
	.section	".note.GNU-stack","",@progbits

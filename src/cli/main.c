/* main.c - STUB */
#include <stdio.h>
#include "visdev.h"
int main(void)
{
	printf("visdev %s\n", vd_version());
	return 0;
}

# ccp.ko out of tree, from a folder written by `make source` in polycc's datapath/ (the sources,
# libccp's hardened files and the Kbuild; DKMS builds /usr/src/ccp-VERSION so):
#   make [KDIR=/lib/modules/VERSION/build]
KDIR ?= /lib/modules/$(shell uname -r)/build

all:
	$(MAKE) -C $(KDIR) M=$(CURDIR) modules

clean:
	$(MAKE) -C $(KDIR) M=$(CURDIR) clean
